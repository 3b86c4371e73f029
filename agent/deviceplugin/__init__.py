"""Built-in DevicePlugin v1beta1 servers (the plugin side of the kubelet API)."""
