// Package calibrate measures a cost profile (sim/costprofile) on the machine
// it runs on: generated clusters (sim/clustergen) of growing size are
// programmed into real tables, in throwaway network namespaces, by
// proxysim's own proxiers over the same kernel code `--dataplane netns`
// uses, and each sync's kernel time is timed beside the work it did. The
// curves fitted over those points are the profile. It runs as root; see
// docs/cost-profiles.md.
package calibrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/netns"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/clustergen"
	"github.com/proxysim/proxysim/sim/costprofile"
	"github.com/proxysim/proxysim/sim/iptables"
	"github.com/proxysim/proxysim/sim/nftables"
	"github.com/proxysim/proxysim/sim/proxy"
	"github.com/proxysim/proxysim/sim/runner"
	"github.com/proxysim/proxysim/sim/vclock"
)

// Shape is one generated cluster: Services with EndpointsPerService
// endpoints each.
type Shape struct {
	Services, EndpointsPerService int
}

// Size is the cluster's Services plus endpoints.
func (s Shape) Size() int { return s.Services * (1 + s.EndpointsPerService) }

func (s Shape) String() string { return fmt.Sprintf("%d×%d", s.Services, s.EndpointsPerService) }

// Options say what to measure.
type Options struct {
	// Dataplanes to measure (costprofile names); default all three this
	// host can program: iptables-nft, iptables-legacy, nftables.
	Dataplanes []string
	// Shapes are the clusters measured, each Repeats times.
	Shapes  []Shape
	Repeats int
	// MaxSize caps, per dataplane, the clusters measured by their size
	// (Services plus endpoints): iptables-nft's restore grows faster than
	// linearly, and a 20,000-Service full sync takes it minutes on a small
	// machine. Its curve past the cap is an extrapolation.
	MaxSize map[string]int
	// Progress, when set, gets a line per point measured.
	Progress io.Writer
	// Name is the profile's name (default "calibrated").
	Name string
}

// Default measures clusters from 100 to 20,000 Services with 1, 2, 4, 10
// and 50 endpoints each, 3 times each; iptables-nft and nftables only up to
// 6,000 Services plus endpoints (see MaxSize).
func Default() Options {
	return Options{
		Shapes: []Shape{
			{100, 1}, {100, 10}, {100, 50}, {300, 2}, {500, 1}, {1000, 1}, {1000, 2}, {1000, 4}, {2000, 2}, {3000, 1},
			{1000, 10}, {300, 50}, {5000, 2}, {10000, 1}, {20000, 1},
		},
		Repeats: 3,
		MaxSize: map[string]int{costprofile.IPTablesNFT: 6000, costprofile.NFTables: 6000},
	}
}

// Quick is Default cut down for CI (under 2 minutes here): eight clusters
// up to 1,500 Services, three times each (a point is the median of its
// repeats, so one slow repeat on a busy machine does not move it).
func Quick() Options {
	return Options{
		Shapes: []Shape{
			{100, 1}, {100, 10}, {300, 2}, {500, 1}, {700, 1}, {1000, 1}, {1000, 2}, {1500, 1},
		},
		Repeats: 3,
	}
}

// Measured kinds: the profile's kernel kinds, with partial syncs told
// apart by what changed.
const (
	PartialService  = "partial-service"
	PartialEndpoint = "partial-endpoint"
)

// Sample is one sync measured: the kind of sync it was made to be, the
// work the proxier reported, the kernel time the calls took, and the wall
// time of the whole sync (the proxier's compute in proxysim included).
type Sample struct {
	Dataplane string
	Shape     Shape
	Kind      string
	Work      sim.SyncWork
	Kernel    netns.KernelTime
	Wall      time.Duration
}

// Result is a calibration: every sample, and the profile fitted on them.
type Result struct {
	Samples []Sample
	Profile *costprofile.Profile
	// Elapsed is the calibration's wall time.
	Elapsed time.Duration
}

// ErrNotRoot: calibrate creates namespaces.
var ErrNotRoot = errors.New("calibrate runs as root: it creates network namespaces and programs their tables")

// Run measures every dataplane over every shape and fits the profile.
func Run(o Options) (*Result, error) {
	if !netns.Privileged() {
		return nil, ErrNotRoot
	}
	if len(o.Dataplanes) == 0 {
		o.Dataplanes = []string{costprofile.IPTablesNFT, costprofile.IPTablesLegacy, costprofile.NFTables}
	}
	if o.Repeats < 1 {
		o.Repeats = 1
	}
	if o.Name == "" {
		o.Name = "calibrated"
	}
	for _, d := range o.Dataplanes {
		if d == costprofile.IPVS {
			return nil, errors.New("ipvs: calibrate refuses to measure IPVS: this host has no ip_vs, and in the VM the kernel side is emulation, not a kernel's timing")
		}
		if _, err := opener(d); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	res := &Result{}
	for _, d := range o.Dataplanes {
		for _, sh := range o.Shapes {
			if limit, ok := o.MaxSize[d]; ok && sh.Size() > limit {
				continue
			}
			for r := range o.Repeats {
				ss, err := measure(d, sh, uint64(r+1))
				if err != nil {
					return nil, fmt.Errorf("%s %s: %w", d, sh, err)
				}
				res.Samples = append(res.Samples, ss...)
				if o.Progress != nil {
					fmt.Fprintf(o.Progress, "%-16s %-9s run %d:", d, sh, r+1)
					for _, s := range ss {
						fmt.Fprintf(o.Progress, " %s %s", s.Kind, s.Kernel.Total().Round(time.Millisecond))
					}
					fmt.Fprintln(o.Progress)
				}
			}
		}
	}
	res.Elapsed = time.Since(start)
	p, err := Fit(o.Name, res.Samples)
	if err != nil {
		return nil, err
	}
	p.Machine = ThisMachine(o.Dataplanes)
	res.Profile = p
	return res, nil
}

// kernel is one namespace's tables behind a timed proxier backend.
type kernel struct {
	backend func(*sim.World) (proxy.Backend, error)
	take    func() netns.KernelTime
	close   func()
}

// opener checks a dataplane name and returns how to open its tables in a
// fresh anonymous namespace.
func opener(dataplane string) (func() (*kernel, error), error) {
	nodeIP := net.ParseIP("192.168.0.1").To4()
	switch dataplane {
	case costprofile.IPTablesNFT, costprofile.IPTablesLegacy:
		b := netns.NFT
		if dataplane == costprofile.IPTablesLegacy {
			b = netns.Legacy
		}
		if _, err := netns.LookIPTables(b); err != nil {
			return nil, err
		}
		return func() (*kernel, error) {
			ns, err := netns.CreateAnonymous("calibrate")
			if err != nil {
				return nil, err
			}
			ipt, err := ns.IPTables(b)
			if err != nil {
				ns.Close()
				return nil, err
			}
			timed := &netns.TimedIPTables{Dataplane: ipt}
			cfg := iptables.Config{ClusterCIDR: "10.128.0.0/9", NodeIP: nodeIP, SyncPeriod: time.Hour}
			return &kernel{
				backend: func(w *sim.World) (proxy.Backend, error) {
					return iptables.New(cfg, timed, w.Clock, nil), nil
				},
				take:  timed.Take,
				close: func() { ns.Close() },
			}, nil
		}, nil
	case costprofile.NFTables:
		if _, err := exec.LookPath("nft"); err != nil {
			return nil, fmt.Errorf("nftables: nft is not installed: %s", netns.DoctorHint)
		}
		return func() (*kernel, error) {
			ns, err := netns.CreateAnonymous("calibrate")
			if err != nil {
				return nil, err
			}
			nft, err := ns.NFTables(knftables.IPv4Family, nftables.Table)
			if err != nil {
				ns.Close()
				return nil, err
			}
			timed := &netns.TimedNFTables{Interface: nft}
			cfg := nftables.Config{ClusterCIDR: "10.128.0.0/9", NodePortIPs: []net.IP{nodeIP}}
			return &kernel{
				backend: func(w *sim.World) (proxy.Backend, error) {
					return nftables.New(cfg, timed, w.Clock, nil), nil
				},
				take: timed.Take,
				close: func() {
					// The table goes with the namespace; delete it first all
					// the same, so a kept handle holds nothing big.
					tx := nft.NewTransaction()
					tx.Delete(&knftables.Table{})
					_ = nft.Run(context.Background(), tx)
					ns.Close()
				},
			}, nil
		}, nil
	}
	return nil, fmt.Errorf("unknown dataplane %q (calibrate measures %s, %s and %s)", dataplane,
		costprofile.IPTablesNFT, costprofile.IPTablesLegacy, costprofile.NFTables)
}

// ClusterSpec is the generated cluster of a shape: what calibrate programs,
// and what a profile's compute part is timed on (e2e/upstream).
func ClusterSpec(sh Shape, seed uint64) clustergen.Spec {
	return clustergen.Spec{
		Seed: seed, Services: sh.Services, Nodes: 10,
		EndpointsPerService: clustergen.Mix[int]{sh.EndpointsPerService: 1},
		Types:               clustergen.Mix[v1.ServiceType]{v1.ServiceTypeClusterIP: 8, v1.ServiceTypeNodePort: 1, v1.ServiceTypeLoadBalancer: 1},
		// Wide enough for 20,000 Services' node ports.
		NodePortRange: "20000-60000",
	}
}

// measure programs one cluster into a fresh namespace: a new node's full
// sync, a partial sync after one endpoint changed, one after one Service
// changed, and a restart's full sync over the table left there.
func measure(dataplane string, sh Shape, seed uint64) ([]Sample, error) {
	open, err := opener(dataplane)
	if err != nil {
		return nil, err
	}
	c, err := clustergen.Generate(ClusterSpec(sh, seed))
	if err != nil {
		return nil, err
	}
	k, err := open()
	if err != nil {
		return nil, err
	}
	defer k.close()
	node := c.Nodes[0].Name
	var out []Sample
	sample := func(w *sim.World, kind string, before int, wall time.Duration) error {
		syncs := w.SyncsView()
		if len(syncs) != before+1 {
			return fmt.Errorf("%s: want one sync, got %d", kind, len(syncs)-before)
		}
		rec := syncs[before]
		if rec.Err != "" {
			return fmt.Errorf("%s: the sync failed: %s", kind, rec.Err)
		}
		out = append(out, Sample{Dataplane: dataplane, Shape: sh, Kind: kind, Work: rec.Work, Kernel: k.take(), Wall: wall})
		return nil
	}
	newWorld := func() (*sim.World, error) {
		w, err := sim.NewWorld(sim.Config{
			Clock:        vclock.New(vclock.Epoch),
			NodeName:     node,
			Runner:       runner.Config{Generation: runner.Cooldown, MinInterval: time.Second, MaxInterval: time.Hour},
			ResyncPeriod: -1,
			NewBackend:   k.backend,
		})
		if err != nil {
			return nil, err
		}
		for _, obj := range c.Objects() {
			if err := w.Create(obj); err != nil {
				w.Close()
				return nil, err
			}
		}
		return w, nil
	}
	// A new node: the initial direct sync into an empty table.
	w, err := newWorld()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := w.Start(); err != nil {
		w.Close()
		return nil, err
	}
	if err := sample(w, string(costprofile.FullNew), 0, time.Since(t0)); err != nil {
		w.Close()
		return nil, err
	}
	// One endpoint turns not ready, then one Service's port changes: each a
	// runner run, a partial sync.
	changes := []struct {
		kind   string
		change func() error
	}{
		{PartialEndpoint, func() error {
			s := c.Slices[len(c.Slices)/2].DeepCopy()
			no := false
			s.Endpoints[0].Conditions = discovery.EndpointConditions{Ready: &no}
			return w.Update(s)
		}},
		{PartialService, func() error {
			svc := c.Services[len(c.Services)/3].DeepCopy()
			svc.Spec.Ports[0].Port++
			return w.Update(svc)
		}},
	}
	for _, ch := range changes {
		before := len(w.SyncsView())
		k.take()
		// The run may start inside the write (the runner is idle).
		t0 := time.Now()
		if err := ch.change(); err != nil {
			w.Close()
			return nil, err
		}
		w.RunUntil(w.Now() + 2*time.Second)
		if err := sample(w, ch.kind, before, time.Since(t0)); err != nil {
			w.Close()
			return nil, err
		}
	}
	w.Close()
	// A restart: a new proxier's full sync over what the last one left.
	w, err = newWorld()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	k.take()
	t0 = time.Now()
	if err := w.Start(); err != nil {
		return nil, err
	}
	if err := sample(w, string(costprofile.FullRestart), 0, time.Since(t0)); err != nil {
		return nil, err
	}
	return out, nil
}

// ThisMachine describes the host: CPU, cores, kernel, tool versions, Go,
// the date and the load.
func ThisMachine(dataplanes []string) costprofile.Machine {
	m := costprofile.Machine{Cores: runtime.NumCPU(), Go: runtime.Version(), Date: time.Now().UTC().Format("2006-01-02")}
	m.Host, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if kv, err := netns.KernelVersion(); err == nil {
		m.Kernel = kv
	}
	m.Load = LoadAverage()
	var ipt []string
	for _, d := range dataplanes {
		switch d {
		case costprofile.IPTablesNFT, costprofile.IPTablesLegacy:
			bin := "iptables-nft"
			if d == costprofile.IPTablesLegacy {
				bin = "iptables-legacy"
			}
			if out, err := exec.Command(bin, "--version").Output(); err == nil {
				ipt = append(ipt, strings.TrimSpace(string(out)))
			}
		case costprofile.NFTables:
			if out, err := exec.Command("nft", "--version").Output(); err == nil {
				m.NFT = strings.TrimSpace(string(out))
			}
		}
	}
	m.IPTables = strings.Join(ipt, "; ")
	return m
}

// LoadAverage is the host's load average over 1, 5 and 15 minutes, as
// /proc/loadavg gives it ("" when unreadable): what a timing was measured
// under.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
