// nripeer: the Go side of hwagent's NRI bench, our own code built inside containerd's
// vendored tree (tests/peer/nri/build.sh).
//
//	nripeer floor --socket S [--cpus 0-1] [--mems 0]
//	    The floor plugin: NRI's own plugin stub (github.com/containerd/nri/pkg/stub)
//	    subscribed to the events hwagent subscribes to, answering every CreateContainer
//	    with a fixed cpuset adjustment and deciding nothing. What any NRI plugin costs.
//	nripeer drive --socket S --known N --rounds R --batch K [--warmup W]
//	    The runtime side: containerd's vendored NRI adaptation (pkg/adaptation, the code
//	    containerd calls plugins with) listening on S. The first plugin that connects is
//	    synchronized with N running containers (one per pod, as a node's Synchronize),
//	    then, R times: K pods run (RunPodSandbox), K timed CreateContainer round trips
//	    (event in, adjustment out), the K containers started, then stopped and removed
//	    with their pods, so the plugin knows N..N+K containers while it is timed.
//	    Prints one JSON object: every round trip in µs, the adjustments seen, and the
//	    on-CPU time (ns, every thread, /proc/PID/task/*/schedstat) of the plugin (--plugin-pid,
//	    or the peer of the connection) and of this process during the timed calls only.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
)

// the events hwagent's plugin subscribes to (agent/nri/plugin.py SUBSCRIBED)
var subscribed = []api.Event{
	api.Event_RUN_POD_SANDBOX, api.Event_STOP_POD_SANDBOX, api.Event_REMOVE_POD_SANDBOX,
	api.Event_CREATE_CONTAINER, api.Event_START_CONTAINER, api.Event_UPDATE_CONTAINER,
	api.Event_STOP_CONTAINER, api.Event_REMOVE_CONTAINER,
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: nripeer floor|drive [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "floor":
		err = floorMain(os.Args[2:])
	case "drive":
		err = driveMain(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nripeer:", err)
		os.Exit(1)
	}
}

// ---------------------------------------------------------------- floor plugin

type floor struct{ cpus, mems string }

func (f *floor) Configure(context.Context, string, string, string) (api.EventMask, error) {
	var mask api.EventMask
	mask.Set(subscribed...)
	return mask, nil
}
func (f *floor) Synchronize(context.Context, []*api.PodSandbox, []*api.Container) ([]*api.ContainerUpdate, error) {
	return nil, nil
}
func (f *floor) RunPodSandbox(context.Context, *api.PodSandbox) error    { return nil }
func (f *floor) StopPodSandbox(context.Context, *api.PodSandbox) error   { return nil }
func (f *floor) RemovePodSandbox(context.Context, *api.PodSandbox) error { return nil }
func (f *floor) CreateContainer(_ context.Context, _ *api.PodSandbox, _ *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	adj := &api.ContainerAdjustment{}
	if f.cpus != "" {
		adj.SetLinuxCPUSetCPUs(f.cpus)
	}
	if f.mems != "" {
		adj.SetLinuxCPUSetMems(f.mems)
	}
	return adj, nil, nil
}
func (f *floor) StartContainer(context.Context, *api.PodSandbox, *api.Container) error { return nil }
func (f *floor) UpdateContainer(context.Context, *api.PodSandbox, *api.Container, *api.LinuxResources) ([]*api.ContainerUpdate, error) {
	return nil, nil
}
func (f *floor) StopContainer(context.Context, *api.PodSandbox, *api.Container) ([]*api.ContainerUpdate, error) {
	return nil, nil
}
func (f *floor) RemoveContainer(context.Context, *api.PodSandbox, *api.Container) error { return nil }

func floorMain(args []string) error {
	fs := flag.NewFlagSet("floor", flag.ExitOnError)
	socket := fs.String("socket", api.DefaultSocketPath, "the runtime's NRI socket")
	name := fs.String("name", "floor", "plugin name")
	idx := fs.String("index", "90", "plugin index")
	cpus := fs.String("cpus", "", "cpuset.cpus every CreateContainer is answered with")
	mems := fs.String("mems", "", "cpuset.mems every CreateContainer is answered with")
	_ = fs.Parse(args)
	s, err := stub.New(&floor{cpus: *cpus, mems: *mems}, stub.WithSocketPath(*socket),
		stub.WithPluginName(*name), stub.WithPluginIdx(*idx))
	if err != nil {
		return err
	}
	return s.Run(context.Background())
}

// ---------------------------------------------------------------- runtime driver

func pod(i int) *api.PodSandbox {
	id := fmt.Sprintf("%064x", 0x5000000+i)
	return &api.PodSandbox{
		Id: id, Name: fmt.Sprintf("bench-%d", i), Uid: fmt.Sprintf("uid-bench-%d", i), Namespace: "bench",
		Labels:      map[string]string{"io.kubernetes.pod.name": fmt.Sprintf("bench-%d", i), "io.kubernetes.pod.namespace": "bench", "app": "bench"},
		Annotations: map[string]string{"kubernetes.io/config.source": "api", "kubernetes.io/config.seen": "2026-12-07T20:00:00Z"},
		Linux: &api.LinuxPodSandbox{
			CgroupParent: "/kubepods/burstable/pod" + fmt.Sprintf("uid-bench-%d", i),
			CgroupsPath:  "/kubepods/burstable/pod" + fmt.Sprintf("uid-bench-%d", i) + "/" + id,
			Namespaces:   []*api.LinuxNamespace{{Type: "ipc"}, {Type: "uts"}, {Type: "mount"}, {Type: "pid"}},
		},
		Pid: 0,
	}
}

// a Burstable container (requests 250m CPU and 64 MiB, limit 128 MiB) with what the CRI puts in a real one
func container(p *api.PodSandbox, i int, state api.ContainerState) *api.Container {
	id := fmt.Sprintf("%064x", 0xc000000+i)
	shares, quota, period, mem := uint64(256), int64(-1), uint64(100000), int64(128<<20)
	return &api.Container{
		Id: id, PodSandboxId: p.Id, Name: "main", State: state,
		Labels: map[string]string{"io.kubernetes.container.name": "main", "io.kubernetes.pod.name": p.Name,
			"io.kubernetes.pod.namespace": p.Namespace, "io.kubernetes.pod.uid": p.Uid},
		Annotations: map[string]string{"io.kubernetes.container.hash": "1a2b3c4d", "io.kubernetes.container.restartCount": "0"},
		Args:        []string{"/pause"},
		Env:         []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOSTNAME=node", "KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443"},
		Mounts: []*api.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/etc/hosts", Type: "bind", Source: "/var/lib/kubelet/pods/" + p.Uid + "/etc-hosts", Options: []string{"rbind", "rprivate", "rw"}},
			{Destination: "/var/run/secrets/kubernetes.io/serviceaccount", Type: "bind", Source: "/var/lib/kubelet/pods/" + p.Uid + "/volumes/token", Options: []string{"rbind", "rprivate", "ro"}},
		},
		Linux: &api.LinuxContainer{
			Namespaces: []*api.LinuxNamespace{{Type: "ipc", Path: "/proc/1/ns/ipc"}, {Type: "mount"}, {Type: "pid"}},
			Resources: &api.LinuxResources{
				Memory: &api.LinuxMemory{Limit: api.Int64(mem)},
				Cpu:    &api.LinuxCPU{Shares: api.UInt64(shares), Quota: api.Int64(quota), Period: api.UInt64(period)},
			},
			OomScoreAdj: api.Int(985),
			CgroupsPath: p.Linux.CgroupParent + "/" + id,
		},
	}
}

// on-CPU nanoseconds of every live thread of pid (schedstat's first field)
func cpuNS(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var total int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			total += n
		}
	}
	return total
}

type result struct {
	Known        int                `json:"known"`
	Batch        int                `json:"batch"`
	Rounds       int                `json:"rounds"`
	SyncMS       float64            `json:"sync_ms"`
	RoundTripUS  []float64          `json:"round_trip_us"`
	PluginCPUNS  int64              `json:"plugin_cpu_ns"`
	RuntimeCPUNS int64              `json:"runtime_cpu_ns"`
	CreateWallNS int64              `json:"create_wall_ns"`
	PluginPID    int                `json:"plugin_pid"`
	Adjustments  map[string]int     `json:"adjustments"`
	Updates      int                `json:"updates_from_plugin"`
	Errors       []string           `json:"errors"`
	SyncFailures []string           `json:"sync_failures"`
	Pctl         map[string]float64 `json:"percentiles_us"`
}

func driveMain(args []string) error {
	fs := flag.NewFlagSet("drive", flag.ExitOnError)
	socket := fs.String("socket", "", "the NRI socket to listen on")
	known := fs.Int("known", 10, "running containers the plugin is synchronized with")
	rounds := fs.Int("rounds", 20, "rounds of timed creates")
	batch := fs.Int("batch", 10, "timed creates per round")
	warmup := fs.Int("warmup", 1, "untimed rounds first")
	pluginPID := fs.Int("plugin-pid", 0, "the plugin's pid, for its CPU time")
	pidFile := fs.String("plugin-pid-file", "", "a file the plugin's pid is written to (read once it synchronized)")
	wait := fs.Duration("wait", 60*time.Second, "how long to wait for a plugin")
	_ = fs.Parse(args)
	if *socket == "" {
		return fmt.Errorf("--socket is required")
	}
	dir, _ := os.MkdirTemp("", "nripeer-")
	defer os.RemoveAll(dir)

	res := &result{Known: *known, Batch: *batch, Rounds: *rounds, PluginPID: *pluginPID,
		Adjustments: map[string]int{}, Errors: []string{}, SyncFailures: []string{}}
	pods := make([]*api.PodSandbox, *known)
	ctrs := make([]*api.Container, *known)
	for i := range pods {
		pods[i] = pod(i)
		ctrs[i] = container(pods[i], i, api.ContainerState_CONTAINER_RUNNING)
	}
	synced := make(chan time.Duration, 1)
	started := false // Start() syncs the pre-installed plugins (none): only a connecting plugin counts
	// a plugin whose Synchronize fails (e.g. answers after the 2 s request timeout) is dropped by
	// the runtime; it may connect again: each failure is reported, the first success starts the run
	syncFn := func(ctx context.Context, cb adaptation.SyncCB) error {
		began := time.Now()
		_, err := cb(ctx, pods, ctrs)
		if !started {
			return err
		}
		if err != nil {
			res.SyncFailures = append(res.SyncFailures, fmt.Sprintf("after %.0f ms: %v",
				float64(time.Since(began).Microseconds())/1000, err))
			return err
		}
		select {
		case synced <- time.Since(began):
		default:
		}
		return nil
	}
	updateFn := func(_ context.Context, u []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
		res.Updates += len(u)
		return nil, nil
	}
	r, err := adaptation.New("containerd", "v2-nripeer", syncFn, updateFn,
		adaptation.WithSocketPath(*socket), adaptation.WithPluginPath(filepath.Join(dir, "plugins")),
		adaptation.WithPluginConfigPath(filepath.Join(dir, "conf.d")))
	if err != nil {
		return err
	}
	if err := r.Start(); err != nil {
		return err
	}
	defer r.Stop()
	started = true
	fmt.Fprintln(os.Stderr, "nripeer: listening on", *socket)
	select {
	case d := <-synced:
		res.SyncMS = float64(d.Microseconds()) / 1000
	case <-time.After(*wait):
		return fmt.Errorf("no plugin synchronized in %s", *wait)
	}
	time.Sleep(200 * time.Millisecond) // the adaptation adds the plugin right after its sync returns
	if *pidFile != "" {
		b, err := os.ReadFile(*pidFile)
		if err != nil {
			return err
		}
		if *pluginPID, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			return fmt.Errorf("%s: %w", *pidFile, err)
		}
		res.PluginPID = *pluginPID
	}

	ctx := context.Background()
	next := 1_000_000
	for round := 0; round < *warmup+*rounds; round++ {
		timed := round >= *warmup
		ps := make([]*api.PodSandbox, *batch)
		cs := make([]*api.Container, *batch)
		for k := range ps {
			ps[k] = pod(next)
			cs[k] = container(ps[k], next, api.ContainerState_CONTAINER_CREATED)
			next++
			if err := r.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: ps[k]}); err != nil {
				res.Errors = append(res.Errors, "RunPodSandbox: "+err.Error())
			}
		}
		cpu0, self0, wall0 := cpuNS(*pluginPID), cpuNS(os.Getpid()), time.Now()
		for k := range ps {
			began := time.Now()
			rsp, err := r.CreateContainer(ctx, &api.CreateContainerRequest{Pod: ps[k], Container: cs[k]})
			took := time.Since(began)
			if !timed {
				continue
			}
			res.RoundTripUS = append(res.RoundTripUS, float64(took.Nanoseconds())/1000)
			if err != nil {
				res.Errors = append(res.Errors, "CreateContainer: "+err.Error())
				continue
			}
			res.Adjustments[describe(rsp.GetAdjust())]++
		}
		if timed {
			res.CreateWallNS += time.Since(wall0).Nanoseconds()
			res.PluginCPUNS += cpuNS(*pluginPID) - cpu0
			res.RuntimeCPUNS += cpuNS(os.Getpid()) - self0
		}
		for k := range ps {
			cs[k].State = api.ContainerState_CONTAINER_RUNNING
			cs[k].Pid = 0
			_ = r.StartContainer(ctx, &api.StartContainerRequest{Pod: ps[k], Container: cs[k]})
		}
		for k := range ps {
			cs[k].State = api.ContainerState_CONTAINER_STOPPED
			_, _ = r.StopContainer(ctx, &api.StopContainerRequest{Pod: ps[k], Container: cs[k]})
			_ = r.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: ps[k], Container: cs[k]})
			_ = r.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: ps[k]})
			_ = r.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: ps[k]})
		}
	}
	res.Pctl = percentiles(res.RoundTripUS)
	if len(res.Errors) > 20 {
		res.Errors = append(res.Errors[:20], fmt.Sprintf("... %d errors in all", len(res.Errors)))
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// the adjustment's Linux resources in a few words, e.g. "cpus=0-1 mems=0"
func describe(a *api.ContainerAdjustment) string {
	if a == nil || a.Linux == nil || a.Linux.Resources == nil {
		return "none"
	}
	var parts []string
	res := a.Linux.Resources
	if c := res.Cpu; c != nil {
		if c.Cpus != "" {
			parts = append(parts, "cpus="+c.Cpus)
		}
		if c.Mems != "" {
			parts = append(parts, "mems="+c.Mems)
		}
		if c.Shares != nil {
			parts = append(parts, fmt.Sprintf("shares=%d", c.Shares.GetValue()))
		}
		if c.Quota != nil {
			parts = append(parts, fmt.Sprintf("quota=%d", c.Quota.GetValue()))
		}
	}
	if m := res.Memory; m != nil && m.Limit != nil {
		parts = append(parts, fmt.Sprintf("memory=%d", m.Limit.GetValue()))
	}
	keys := make([]string, 0, len(res.Unified))
	for k := range res.Unified {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, k+"="+res.Unified[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

func percentiles(us []float64) map[string]float64 {
	if len(us) == 0 {
		return map[string]float64{}
	}
	s := append([]float64(nil), us...)
	sort.Float64s(s)
	at := func(q float64) float64 { return s[int(q*float64(len(s)-1)+0.5)] }
	return map[string]float64{"p50": at(0.50), "p90": at(0.90), "p99": at(0.99), "max": s[len(s)-1]}
}
