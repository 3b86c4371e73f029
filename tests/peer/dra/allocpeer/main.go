// allocpeer: Kubernetes' own structured DRA allocator (k8s.io/dynamic-resource-allocation/structured,
// the package the kube-scheduler uses, v1.32 as kubeedge vendors it) behind a JSON-lines interface,
// so that hwagent's standalone allocator can be compared with it case by case. Our code; it
// imports, never copies, the allocator.
//
// Each stdin line is one case (resource.k8s.io/v1 shapes, as hwagent reads them):
//
//	{"id": "...", "op": "allocate"|"judge", "runs": 4, "timeout_ms": 2000, "node": "n1",
//	 "slices": [ResourceSlice...], "classes": [DeviceClass...], "claim": ResourceClaim,
//	 "held": [{"driver","pool","device"}...], "results": [{"request","driver","pool","device"}...]}
//
// and gets one stdout line {"id", "outcomes": [{"verdict", "results"|"error", "runs"}...], "ms"}.
// verdict is "allocated", "unsatisfiable", "error" or "timeout".
//
// allocate: NewAllocator(...).Allocate `runs` times, distinct outcomes with how many runs gave each.
// It walks pools in Go map iteration order, which Go randomizes per iteration; each run also gets its
// own slice order (as given, reversed, then shuffled, seeded), so that no pool order rests on the map
// alone, as a scheduler whose informer lists slices in another order would see them.
//
// judge: is `results` (an allocation found elsewhere) one the real allocator accepts? Every device
// not in results is marked allocated, and each ExactCount request gets its own DeviceClass whose first
// selector admits only the devices results gives it (through a synthetic attribute no case uses), then
// the class's own selectors. All requests stay as they are: they must take every matching device, so a
// matching device left out (now "allocated") fails them. The verdict is "allocated" when the allocator
// then finds exactly these devices per request. pin_all pins All requests as well, drop_constraints
// leaves the claim's constraints out: the caller uses both to say why an allocation was rejected.
//
// The 1.32 allocator has no bound and does not watch its context; a run longer than timeout_ms
// prints "timeout" and the process exits with status 3 (its search cannot be stopped): the
// caller starts a new one for the next case.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// pinAttribute names each device in judge mode; generated cases never use this domain.
const pinAttribute = "allocpeer.hwagent.invalid/id"

// --- resource.k8s.io/v1 shapes (only what the cases use) ---

type attrV1 struct {
	Int     *int64  `json:"int,omitempty"`
	Bool    *bool   `json:"bool,omitempty"`
	String  *string `json:"string,omitempty"`
	Version *string `json:"version,omitempty"`
}

type deviceV1 struct {
	Name       string                            `json:"name"`
	Attributes map[string]attrV1                 `json:"attributes"`
	Capacity   map[string]struct{ Value string } `json:"capacity"`
}

type sliceV1 struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Driver string `json:"driver"`
		Pool   struct {
			Name               string `json:"name"`
			Generation         int64  `json:"generation"`
			ResourceSliceCount int64  `json:"resourceSliceCount"`
		} `json:"pool"`
		NodeName string     `json:"nodeName"`
		AllNodes bool       `json:"allNodes"`
		Devices  []deviceV1 `json:"devices"`
	} `json:"spec"`
}

type selectorV1 struct {
	CEL struct {
		Expression string `json:"expression"`
	} `json:"cel"`
}

type classV1 struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Selectors []selectorV1 `json:"selectors"`
	} `json:"spec"`
}

type claimV1 struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		UID       string `json:"uid"`
	} `json:"metadata"`
	Spec struct {
		Devices struct {
			Requests []struct {
				Name    string `json:"name"`
				Exactly *struct {
					DeviceClassName string       `json:"deviceClassName"`
					Selectors       []selectorV1 `json:"selectors"`
					AllocationMode  string       `json:"allocationMode"`
					Count           *int64       `json:"count"`
				} `json:"exactly"`
			} `json:"requests"`
			Constraints []struct {
				Requests       []string `json:"requests"`
				MatchAttribute *string  `json:"matchAttribute"`
			} `json:"constraints"`
		} `json:"devices"`
	} `json:"spec"`
}

type deviceRef struct {
	Request string `json:"request,omitempty"`
	Driver  string `json:"driver"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
}

type caseIn struct {
	ID        string      `json:"id"`
	Op        string      `json:"op"`
	Runs      int         `json:"runs"`
	TimeoutMS int         `json:"timeout_ms"`
	Node      string      `json:"node"`
	Slices    []sliceV1   `json:"slices"`
	Classes   []classV1   `json:"classes"`
	Claim     claimV1     `json:"claim"`
	Held      []deviceRef `json:"held"`
	Results   []deviceRef `json:"results"`
	// judge only: pin All requests too (to tell which device a selector error came from),
	// and leave the claim's constraints out (to tell a constraint from a selector refusal)
	PinAll          bool `json:"pin_all"`
	DropConstraints bool `json:"drop_constraints"`
}

type outcome struct {
	Verdict string      `json:"verdict"`
	Results []deviceRef `json:"results,omitempty"`
	Error   string      `json:"error,omitempty"`
	Runs    int         `json:"runs"`
}

type caseOut struct {
	ID       string    `json:"id"`
	Outcomes []outcome `json:"outcomes"`
	MS       float64   `json:"ms"`
	Note     string    `json:"note,omitempty"`
}

// --- v1 -> v1beta1 (the 1.32 allocator's API) ---

func selectors(in []selectorV1) []resourceapi.DeviceSelector {
	out := make([]resourceapi.DeviceSelector, 0, len(in))
	for _, s := range in {
		out = append(out, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: s.CEL.Expression}})
	}
	return out
}

func convertSlices(in []sliceV1, pin bool) ([]*resourceapi.ResourceSlice, error) {
	out := make([]*resourceapi.ResourceSlice, 0, len(in))
	for i, s := range in {
		rs := &resourceapi.ResourceSlice{}
		rs.Name = s.Metadata.Name
		if rs.Name == "" {
			rs.Name = fmt.Sprintf("slice-%d", i)
		}
		rs.Spec.Driver = s.Spec.Driver
		rs.Spec.Pool = resourceapi.ResourcePool{Name: s.Spec.Pool.Name, Generation: s.Spec.Pool.Generation,
			ResourceSliceCount: max(s.Spec.Pool.ResourceSliceCount, 1)}
		rs.Spec.NodeName = s.Spec.NodeName
		rs.Spec.AllNodes = s.Spec.AllNodes
		for _, d := range s.Spec.Devices {
			basic := &resourceapi.BasicDevice{Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{},
				Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{}}
			for name, a := range d.Attributes {
				basic.Attributes[resourceapi.QualifiedName(name)] = resourceapi.DeviceAttribute{
					IntValue: a.Int, BoolValue: a.Bool, StringValue: a.String, VersionValue: a.Version}
			}
			for name, c := range d.Capacity {
				q, err := resource.ParseQuantity(c.Value)
				if err != nil {
					return nil, fmt.Errorf("device %s capacity %s: %w", d.Name, name, err)
				}
				basic.Capacity[resourceapi.QualifiedName(name)] = resourceapi.DeviceCapacity{Value: q}
			}
			if pin {
				id := s.Spec.Pool.Name + "/" + d.Name
				basic.Attributes[pinAttribute] = resourceapi.DeviceAttribute{StringValue: &id}
			}
			rs.Spec.Devices = append(rs.Spec.Devices, resourceapi.Device{Name: d.Name, Basic: basic})
		}
		out = append(out, rs)
	}
	return out, nil
}

func convertClaim(in claimV1) (*resourceapi.ResourceClaim, error) {
	c := &resourceapi.ResourceClaim{}
	c.Name, c.Namespace, c.UID = in.Metadata.Name, in.Metadata.Namespace, types.UID(in.Metadata.UID)
	for _, r := range in.Spec.Devices.Requests {
		if r.Exactly == nil {
			return nil, fmt.Errorf("request %s: no exactly (firstAvailable is not in the 1.32 allocator)", r.Name)
		}
		req := resourceapi.DeviceRequest{Name: r.Name, DeviceClassName: r.Exactly.DeviceClassName,
			Selectors: selectors(r.Exactly.Selectors)}
		// API defaulting, which the allocator expects to have happened
		switch r.Exactly.AllocationMode {
		case "", "ExactCount":
			req.AllocationMode = resourceapi.DeviceAllocationModeExactCount
			req.Count = 1
			if r.Exactly.Count != nil {
				req.Count = *r.Exactly.Count
			}
		default:
			req.AllocationMode = resourceapi.DeviceAllocationMode(r.Exactly.AllocationMode)
		}
		c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, req)
	}
	for _, k := range in.Spec.Devices.Constraints {
		c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, resourceapi.DeviceConstraint{
			Requests: k.Requests, MatchAttribute: (*resourceapi.FullyQualifiedName)(k.MatchAttribute)})
	}
	return c, nil
}

type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l))
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("deviceclass %q not found", name)
}

func convertClasses(in []classV1) classLister {
	out := classLister{}
	for _, c := range in {
		dc := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: c.Metadata.Name}}
		dc.Spec.Selectors = selectors(c.Spec.Selectors)
		out[c.Metadata.Name] = dc
	}
	return out
}

func deviceSet(refs []deviceRef) sets.Set[structured.DeviceID] {
	out := sets.New[structured.DeviceID]()
	for _, r := range refs {
		out.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
	}
	return out
}

func cel1(s string) string { b, _ := json.Marshal(s); return string(b) }

// pinned rewrites the inputs of a judge case: see the package comment.
func pinned(in caseIn, slices []*resourceapi.ResourceSlice, classes classLister, claim *resourceapi.ResourceClaim) sets.Set[structured.DeviceID] {
	chosen := deviceSet(in.Results)
	held := sets.New[structured.DeviceID]()
	for _, s := range slices {
		for _, d := range s.Spec.Devices {
			id := structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)
			if !chosen.Has(id) {
				held.Insert(id)
			}
		}
	}
	for i := range claim.Spec.Devices.Requests {
		req := &claim.Spec.Devices.Requests[i]
		if req.AllocationMode != resourceapi.DeviceAllocationModeExactCount && !in.PinAll {
			continue
		}
		var ids []string
		for _, r := range in.Results {
			if r.Request == req.Name {
				ids = append(ids, cel1(r.Pool+"/"+r.Device))
			}
		}
		expr := fmt.Sprintf("device.attributes[%s].id in [%s]", cel1(strings.Split(pinAttribute, "/")[0]),
			strings.Join(ids, ", "))
		pin := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "allocpeer-pin-" + req.Name}}
		pin.Spec.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}
		if base, ok := classes[req.DeviceClassName]; ok {
			pin.Spec.Selectors = append(pin.Spec.Selectors, base.Spec.Selectors...)
		} else {
			continue // unknown class: the allocator says so
		}
		classes[pin.Name] = pin
		req.DeviceClassName = pin.Name
	}
	return held
}

func runOnce(alloc *structured.Allocator, node *v1.Node, timeout time.Duration) (outcome, bool) {
	type answer struct {
		res []resourceapi.AllocationResult
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		res, err := alloc.Allocate(context.Background(), node)
		ch <- answer{res, err}
	}()
	select {
	case a := <-ch:
		switch {
		case a.err != nil:
			return outcome{Verdict: "error", Error: a.err.Error()}, true
		case a.res == nil:
			return outcome{Verdict: "unsatisfiable"}, true
		}
		var refs []deviceRef
		for _, r := range a.res[0].Devices.Results {
			refs = append(refs, deviceRef{Request: r.Request, Driver: r.Driver, Pool: r.Pool, Device: r.Device})
		}
		return outcome{Verdict: "allocated", Results: refs}, true
	case <-time.After(timeout):
		return outcome{Verdict: "timeout"}, false
	}
}

func key(o outcome) string {
	refs := append([]deviceRef(nil), o.Results...)
	sort.Slice(refs, func(i, j int) bool {
		a, b := refs[i], refs[j]
		return a.Request+"\x00"+a.Pool+"\x00"+a.Device < b.Request+"\x00"+b.Pool+"\x00"+b.Device
	})
	b, _ := json.Marshal(outcome{Verdict: o.Verdict, Results: refs, Error: o.Error})
	return string(b)
}

// one answers a case; the bool is false when a search was left running (the process must exit).
func one(in caseIn, cache *cel.Cache) (caseOut, bool) {
	start := time.Now()
	out := caseOut{ID: in.ID}
	fail := func(err error) (caseOut, bool) {
		out.Outcomes = []outcome{{Verdict: "error", Error: "allocpeer input: " + err.Error(), Runs: 1}}
		return out, true
	}
	judge := in.Op == "judge"
	rs, err := convertSlices(in.Slices, judge)
	if err != nil {
		return fail(err)
	}
	claim, err := convertClaim(in.Claim)
	if err != nil {
		return fail(err)
	}
	classes := convertClasses(in.Classes)
	held := deviceSet(in.Held)
	runs := max(in.Runs, 1)
	if judge {
		held = held.Union(pinned(in, rs, classes, claim))
		if in.DropConstraints {
			claim.Spec.Devices.Constraints = nil
		}
	} else if in.Op != "allocate" {
		return fail(fmt.Errorf("op %q: allocate or judge", in.Op))
	}
	timeout := time.Duration(max(in.TimeoutMS, 1)) * time.Millisecond
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: in.Node}}
	seen := map[string]int{}
	rnd := rand.New(rand.NewPCG(uint64(len(in.ID)), 33))
	for i := 0; i < runs; i++ {
		// The allocator walks pools in Go map order (random per run); each run also gets its own
		// slice order (as given, reversed, then shuffled) so that "more than once" means other
		// pool orders.
		order := append([]*resourceapi.ResourceSlice(nil), rs...)
		switch {
		case i == 1:
			slices.Reverse(order)
		case i > 1:
			rnd.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		}
		alloc, err := structured.NewAllocator(context.Background(), false, []*resourceapi.ResourceClaim{claim}, held,
			classes, order, cache)
		if err != nil {
			return fail(err)
		}
		o, finished := runOnce(alloc, node, timeout)
		k := key(o)
		if idx, ok := seen[k]; ok {
			out.Outcomes[idx].Runs++
		} else {
			o.Runs = 1
			seen[k] = len(out.Outcomes)
			out.Outcomes = append(out.Outcomes, o)
		}
		if !finished {
			out.MS = float64(time.Since(start).Microseconds()) / 1000
			out.Note = "search left running; exiting"
			return out, false
		}
	}
	out.MS = float64(time.Since(start).Microseconds()) / 1000
	return out, true
}

func main() {
	cache := cel.NewCache(1024)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	w := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(w)
	for in.Scan() {
		var c caseIn
		if err := json.Unmarshal(in.Bytes(), &c); err != nil {
			fmt.Fprintf(os.Stderr, "allocpeer: bad input line: %v\n", err)
			os.Exit(2)
		}
		out, ok := one(c, cache)
		_ = enc.Encode(out)
		_ = w.Flush()
		if !ok {
			os.Exit(3)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "allocpeer: %v\n", err)
		os.Exit(2)
	}
}
