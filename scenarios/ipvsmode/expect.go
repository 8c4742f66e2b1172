package ipvsmode

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/scenarios/routeexpect"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/route"
)

// tableExpect is the IPVS golden: the table as `ipvsadm -Ln` shows it,
// inline or in a file.
type tableExpect struct {
	IPVS     *string `yaml:"ipvs"`
	IPVSFile string  `yaml:"ipvsFile"`
	Src      scenarios.Src
}

func (e *tableExpect) golden() scenarios.Golden {
	return scenarios.Golden{Key: "ipvs", FileKey: "ipvsFile", Inline: e.IPVS, File: e.IPVSFile, Src: e.Src}
}

func (e *tableExpect) Validate(v *scenarios.Validator) { e.golden().Validate(v) }
func (e *tableExpect) Check(r *replay.Run)             { r.CheckGolden(e.golden(), nil) }

// rulesExpect is the packet path's golden (with packetPath): the ipsets as
// `ipset save` lists them, then the filter and nat tables as
// iptables-save does, inline or in a file.
type rulesExpect struct {
	Rules     *string `yaml:"ipvsRules"`
	RulesFile string  `yaml:"ipvsRulesFile"`
	Src       scenarios.Src
}

func (e *rulesExpect) golden() scenarios.Golden {
	return scenarios.Golden{Key: "ipvsRules", FileKey: "ipvsRulesFile", Inline: e.Rules, File: e.RulesFile, Src: e.Src}
}

// readRules renders the ipsets and iptables rules for the ipvsRules golden.
func readRules(r *replay.Run) (string, error) {
	d := dataplaneOf(r)
	if d == nil || d.raw.IPSets == nil || d.raw.IPTables == nil {
		return "", fmt.Errorf("the dataplane has no ipsets and iptables rules (set proxy.packetPath)")
	}
	return d.Rules()
}

func (e *rulesExpect) Validate(v *scenarios.Validator) { e.golden().Validate(v) }
func (e *rulesExpect) Check(r *replay.Run)             { r.CheckGolden(e.golden(), readRules) }

// knownSysctls are the sysctls the IPVS proxier and the fake know.
var knownSysctls = map[string]bool{
	ipvs.SysctlConntrack: true, ipvs.SysctlConnReuseMode: true, ipvs.SysctlExpireNodestConn: true,
	ipvs.SysctlExpireQuiescentTemplate: true, ipvs.SysctlIPForward: true, ipvs.SysctlArpIgnore: true,
	ipvs.SysctlArpAnnounce: true,
}

// sysctlsExpect: the named sysctls have these values.
type sysctlsExpect struct {
	Sysctls map[string]int `yaml:"sysctls"`
	Src     scenarios.Src
}

func (e *sysctlsExpect) Validate(v *scenarios.Validator) {
	for name := range e.Sysctls {
		if !knownSysctls[name] {
			v.Errorf(e.Src.At("sysctls"), "unknown sysctl %q (known: %s)", name, strings.Join(slices.Sorted(maps.Keys(knownSysctls)), ", "))
		}
	}
}

func (e *sysctlsExpect) Check(r *replay.Run) {
	dp := dataplaneOf(r).raw
	for _, n := range slices.Sorted(maps.Keys(e.Sysctls)) {
		v, err := dp.Sysctl.Get(n)
		got := fmt.Sprint(v)
		if err != nil {
			got = err.Error()
		}
		if err != nil || v != e.Sysctls[n] {
			r.Fail(e.Src.At("sysctls"), "sysctls."+n, fmt.Sprint(e.Sysctls[n]), got)
		}
	}
}

// addressesExpect: exactly these addresses are bound to kube-ipvs0.
type addressesExpect struct {
	Addresses *[]string `yaml:"addresses"`
	Src       scenarios.Src
}

func (*addressesExpect) Validate(*scenarios.Validator) {}

func (e *addressesExpect) Check(r *replay.Run) {
	if e.Addresses == nil {
		return
	}
	got, err := dataplaneOf(r).raw.Addresses.Addresses(ipvs.DummyDevice)
	g := strings.Join(got, " ")
	if err != nil {
		g = err.Error()
	}
	want := append([]string(nil), (*e.Addresses)...)
	slices.Sort(want)
	if g != strings.Join(want, " ") {
		r.Fail(e.Src.At("addresses"), "addresses", "["+strings.Join(want, " ")+"]", "["+g+"]")
	}
}

// drainingExpect: exactly these real servers are in graceful termination.
type drainingExpect struct {
	Draining *[]string `yaml:"draining"`
	Src      scenarios.Src
}

func (*drainingExpect) Validate(*scenarios.Validator) {}

func (e *drainingExpect) Check(r *replay.Run) {
	if e.Draining == nil {
		return
	}
	var got []string
	if p, ok := r.World().Backend().(*ipvs.Proxier); ok {
		got = p.Graceful().Pending()
	}
	want := append([]string(nil), (*e.Draining)...)
	slices.Sort(want)
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		r.Fail(e.Src.At("draining"), "draining", "["+strings.Join(want, "; ")+"]", "["+strings.Join(got, "; ")+"]")
	}
}

// ConnExpect is what must be true of one connection: how its connect went
// and what IPVS now holds for it.
type ConnExpect struct {
	Result         string              `yaml:"result"` // connected, refused or timeout
	LatencyAtLeast *scenarios.Duration `yaml:"latencyAtLeast"`
	LatencyAtMost  *scenarios.Duration `yaml:"latencyAtMost"`
	Server         string              `yaml:"server"` // real server ip:port it is bound to
	State          string              `yaml:"state"`  // ESTABLISHED, TIME_WAIT, UDP, GONE, ...
	Src            scenarios.Src
}

// connectionsExpect checks connections opened by connect steps.
type connectionsExpect struct {
	Connections map[string]ConnExpect `yaml:"connections"`
	Src         scenarios.Src
}

func (e *connectionsExpect) Validate(v *scenarios.Validator) {
	opened := connsOf(v).opened
	for _, name := range slices.Sorted(maps.Keys(e.Connections)) {
		c := e.Connections[name]
		if !opened[name] {
			v.Errorf(e.Src.At("connections"), "no connection named %q has been opened", name)
		}
		if c.Server != "" {
			if _, _, err := splitHostPort(c.Server); err != nil {
				v.Errorf(c.Src.At("server"), "%v", err)
			}
		}
	}
}

func (e *connectionsExpect) Check(r *replay.Run) {
	d := dataplaneOf(r)
	for _, name := range slices.Sorted(maps.Keys(e.Connections)) {
		ce := e.Connections[name]
		fail := func(key, expected, got string) {
			r.Fail(ce.Src.At(key), "connections."+name+"."+key, expected, got)
		}
		res := d.conns[name]
		if ce.Result != "" {
			got := "connected"
			switch {
			case errors.Is(res.Err, ipvs.ErrRefused):
				got = "refused"
			case errors.Is(res.Err, ipvs.ErrTimeout):
				got = "timeout"
			case res.Err != nil:
				got = res.Err.Error()
			}
			if got != ce.Result {
				fail("result", ce.Result, got)
			}
		}
		if ce.LatencyAtLeast != nil && res.Latency < ce.LatencyAtLeast.D() {
			fail("latencyAtLeast", "at least "+ce.LatencyAtLeast.String(), res.Latency.String())
		}
		if ce.LatencyAtMost != nil && res.Latency > ce.LatencyAtMost.D() {
			fail("latencyAtMost", "at most "+ce.LatencyAtMost.String(), res.Latency.String())
		}
		if (ce.Server != "" || ce.State != "") && d.traffic != nil {
			info, _ := d.traffic.Conn(name)
			if ce.Server != "" && info.Server != ce.Server {
				if info.Server == "" {
					info.Server = "(none)"
				}
				fail("server", ce.Server, info.Server)
			}
			if ce.State != "" && info.State != ce.State {
				fail("state", ce.State, info.State)
			}
		}
	}
}

// routeExpectation is the `route` expectation (scenarios/routeexpect, the
// same YAML in every mode with a tracer) over the IPVS mode's tracer:
// shares per connection are exact (rr 1/n, wrr weight/sum, sh one server
// per client), and it tells which leave masqueraded (`masqueraded`). On a
// kernel that holds the packet path, real connections must agree with
// the tracer's answer, or the expectation fails with what they did.
var routeExpectation = routeexpect.NewWithMasquerade(func(r *replay.Run, pkt route.Packet) (route.Shares, route.Shares, error) {
	d := dataplaneOf(r)
	if d == nil {
		return nil, nil, fmt.Errorf("the %s dataplane has no tracer", r.Dataplane().Name())
	}
	sh, masq, err := d.RouteMasquerade(pkt)
	if err == nil && d.onKernel != nil {
		err = d.onKernel.check(pkt, sh, masq)
	}
	return sh, masq, err
}, nil)
