"""The kubelet pod-resources v1 API served by hwagent in standalone mode."""
