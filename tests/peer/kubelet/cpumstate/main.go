// cpumstate writes a kubelet root dir's CPU-manager files with the kubelet's own code, so that
// hwagent's reader (agent/kubelet/cpumanager.py) is tested against what a real kubelet writes:
//
//	cpumstate DIR POLICY
//
// DIR/cpu_manager_state comes from the kubelet's checkpoint state (cpumanager/state, the
// checkpoint manager and its checksum), with one exclusive assignment under "static";
// DIR/config.yaml is a KubeletConfiguration (kubelet.config.k8s.io/v1beta1) marshalled as the
// kubelet's config loader reads it. Then it opens the checkpoint again with the other policy and
// prints the kubelet's refusal (the reason hwagent's fix says to remove the file). One JSON line.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	"k8s.io/utils/cpuset"
	"sigs.k8s.io/yaml"
)

func fail(err error) {
	fmt.Fprintln(os.Stderr, "cpumstate:", err)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 3 {
		fail(fmt.Errorf("usage: cpumstate DIR POLICY"))
	}
	dir, policy := os.Args[1], os.Args[2]
	st, err := state.NewCheckpointState(dir, "cpu_manager_state", policy, containermap.NewContainerMap())
	if err != nil {
		fail(err)
	}
	if policy == "static" {
		st.SetDefaultCPUSet(cpuset.New(0, 3))
		st.SetCPUSet("uid-1", "main", cpuset.New(1, 2))
	}
	cfg := kubeletconfig.KubeletConfiguration{
		TypeMeta:         metav1.TypeMeta{Kind: "KubeletConfiguration", APIVersion: "kubelet.config.k8s.io/v1beta1"},
		CPUManagerPolicy: policy,
	}
	doc, err := yaml.Marshal(&cfg)
	if err != nil {
		fail(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), doc, 0o600); err != nil {
		fail(err)
	}
	other := "none"
	if policy == "none" {
		other = "static"
	}
	_, refusal := state.NewCheckpointState(dir, "cpu_manager_state", other, containermap.NewContainerMap())
	out := map[string]string{"policy": policy, "reopened_as": other, "refusal": fmt.Sprint(refusal)}
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
}
