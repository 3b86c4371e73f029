// draharness: the kubelet's own DRA code (Kubernetes 1.32, as kubeedge vendors it)
// against hwagent's DRA driver. Our code; it imports, never copies, the kubelet's.
//
// The kubelet's plugin manager watches <kubelet-root>/plugins_registry with the
// DRA manager's registration handler, exactly as the kubelet wires it; once
// hwagent's driver has registered, the DRA manager (pkg/kubelet/cm/dra) prepares
// a pod's claim (read from a fake API server holding the ResourceClaim given as
// JSON), GetResources says which CDI devices the container gets, each CDI ID is
// resolved in the CDI spec directory, and the pod's claims are unprepared.
//
// Every line printed is `PASS|FAIL|INFO <check>: <JSON>`; the exit status is 1
// when any check failed.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
	draplugin "k8s.io/kubernetes/pkg/kubelet/cm/dra/plugin"
	"k8s.io/kubernetes/pkg/kubelet/config"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager"
	"sigs.k8s.io/yaml"
)

var failed bool

func report(verdict, check string, evidence any) {
	if verdict == "FAIL" {
		failed = true
	}
	b, _ := json.Marshal(evidence)
	fmt.Printf("%s %s: %s\n", verdict, check, b)
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// cdiSpec is the part of a CDI spec file we check (https://github.com/cncf-tags/container-device-interface).
type cdiSpec struct {
	CDIVersion string `json:"cdiVersion"`
	Kind       string `json:"kind"`
	Devices    []struct {
		Name           string `json:"name"`
		ContainerEdits struct {
			DeviceNodes []struct {
				Path string `json:"path"`
			} `json:"deviceNodes"`
			Env []string `json:"env"`
		} `json:"containerEdits"`
	} `json:"devices"`
}

// resolveCDI finds a fully qualified CDI device name ("vendor/class=name") in the spec
// files of dir and returns its device nodes, or an error saying what is missing.
func resolveCDI(dir, id string) ([]string, string, error) {
	kind, name, ok := strings.Cut(id, "=")
	if !ok || !strings.Contains(kind, "/") {
		return nil, "", fmt.Errorf("%q is not a qualified CDI device name (vendor/class=name)", id)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, "", err
	}
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if ext != ".json" && ext != ".yaml" {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, "", err
		}
		var spec cdiSpec
		if err := yaml.Unmarshal(raw, &spec); err != nil {
			return nil, "", fmt.Errorf("%s: %w", e.Name(), err)
		}
		if spec.Kind != kind {
			continue
		}
		for _, d := range spec.Devices {
			if d.Name == name {
				nodes := []string{}
				for _, n := range d.ContainerEdits.DeviceNodes {
					nodes = append(nodes, n.Path)
				}
				return nodes, spec.CDIVersion + " " + e.Name(), nil
			}
		}
	}
	return nil, "", fmt.Errorf("no CDI spec in %s declares %s", dir, id)
}

func cdiFiles(dir string) []string {
	out := []string{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

func main() {
	root := flag.String("kubelet-root", "", "the kubelet root dir hwagent was told (kubelet_root_dir)")
	driver := flag.String("driver", "hwagent.io", "the DRA driver name")
	claimFile := flag.String("claim", "", "an allocated ResourceClaim (resource.k8s.io/v1beta1, JSON or YAML)")
	cdiDir := flag.String("cdi-dir", "", "where hwagent writes CDI spec files")
	wantNodes := flag.String("want-nodes", "", "comma-separated device nodes the container must get")
	timeout := flag.Duration("timeout", 60*time.Second, "how long to wait for the registration")
	flag.Parse()

	raw, err := os.ReadFile(*claimFile)
	if err != nil {
		report("FAIL", "setup", err.Error())
		os.Exit(1)
	}
	claim := &resourceapi.ResourceClaim{}
	if err := yaml.Unmarshal(raw, claim); err != nil {
		report("FAIL", "setup", err.Error())
		os.Exit(1)
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "harness", Namespace: claim.Namespace, UID: types.UID("pod-uid-harness")},
		Spec: v1.PodSpec{
			ResourceClaims: []v1.PodResourceClaim{{Name: "dev", ResourceClaimName: &claim.Name}},
			Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
				Claims: []v1.ResourceClaim{{Name: "dev"}}}}},
		},
	}
	claim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "harness-node"}}
	client := fake.NewSimpleClientset(claim, node)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	state, _ := os.MkdirTemp("", "draharness-state")
	defer os.RemoveAll(state)
	manager, err := dra.NewManagerImpl(client, state, types.NodeName(node.Name))
	if err != nil {
		report("FAIL", "setup", err.Error())
		os.Exit(1)
	}
	ready := config.NewSourcesReady(func(sets.Set[string]) bool { return true })
	getNode := func() (*v1.Node, error) { return node, nil }
	if err := manager.Start(ctx, func() []*v1.Pod { return []*v1.Pod{pod} }, getNode, ready); err != nil {
		report("FAIL", "setup", err.Error())
		os.Exit(1)
	}
	plugins := pluginmanager.NewPluginManager(filepath.Join(*root, "plugins_registry"), record.NewFakeRecorder(64))
	plugins.AddHandler(registerapi.DRAPlugin, manager.GetWatcherHandler())
	stop := make(chan struct{})
	defer close(stop)
	go plugins.Run(ready, stop)

	// 1: registration through the plugin watcher
	start := time.Now()
	var client1 *draplugin.Plugin
	for time.Since(start) < *timeout {
		if p, err := draplugin.NewDRAPluginClient(*driver); err == nil {
			client1 = p
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	report(verdict(client1 != nil), "register", map[string]any{"driver": *driver, "seconds": time.Since(start).Seconds()})
	if client1 == nil {
		os.Exit(1)
	}

	// 2: the DRA manager prepares the pod's claim; 3: what the container gets
	t := time.Now()
	err = manager.PrepareResources(ctx, pod)
	report(verdict(err == nil), "prepare", map[string]any{"error": fmt.Sprint(err), "ms": time.Since(t).Seconds() * 1e3})
	info, err := manager.GetResources(pod, &pod.Spec.Containers[0])
	ids := []string{}
	if err == nil {
		for _, d := range info.CDIDevices {
			ids = append(ids, d.Name)
		}
	}
	report(verdict(err == nil && len(ids) > 0), "container-cdi-devices", map[string]any{"ids": ids, "error": fmt.Sprint(err)})
	got := []string{}
	for _, id := range ids {
		nodes, where, err := resolveCDI(*cdiDir, id)
		report(verdict(err == nil && len(nodes) > 0), "cdi-resolves", map[string]any{"id": id, "spec": where, "nodes": nodes, "error": fmt.Sprint(err)})
		got = append(got, nodes...)
	}
	sort.Strings(got)
	if *wantNodes != "" {
		want := strings.Split(*wantNodes, ",")
		sort.Strings(want)
		report(verdict(strings.Join(got, ",") == strings.Join(want, ",")), "container-device-nodes", map[string]any{"got": got, "want": want})
	}

	// 4: the driver is idempotent: the same request twice, the same answer
	req := &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{{Namespace: claim.Namespace, Name: claim.Name, UID: string(claim.UID)}}}
	a, errA := client1.NodePrepareResources(ctx, req)
	b, errB := client1.NodePrepareResources(ctx, req)
	same := errA == nil && errB == nil && fmt.Sprint(a.Claims) == fmt.Sprint(b.Claims)
	report(verdict(same), "prepare-again-same-answer", map[string]any{"first": a, "second": b})

	// 5: unprepare through the DRA manager; the CDI spec is gone
	before := cdiFiles(*cdiDir)
	t = time.Now()
	err = manager.UnprepareResources(ctx, pod)
	after := cdiFiles(*cdiDir)
	gone := true
	for _, id := range ids {
		if _, _, e := resolveCDI(*cdiDir, id); e == nil {
			gone = false
		}
	}
	report(verdict(err == nil && gone), "unprepare", map[string]any{"error": fmt.Sprint(err), "cdi_before": before, "cdi_after": after, "ms": time.Since(t).Seconds() * 1e3})

	// 6: a claim hwagent has no file for fails in its own answer, not the call
	bad, err := client1.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{{Namespace: claim.Namespace, Name: "no-such-claim", UID: "uid-none"}}})
	perClaim := err == nil && bad.Claims["uid-none"] != nil && bad.Claims["uid-none"].Error != ""
	report(verdict(perClaim), "unknown-claim-per-claim-error", map[string]any{"error": fmt.Sprint(err), "answer": bad})
	if failed {
		os.Exit(1)
	}
}
