package ipvsmode

import (
	"fmt"
	"net"
	"strconv"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim/trace"
)

// Connect opens a client connection through the dataplane.
type Connect struct {
	Name     string `yaml:"name"`
	Client   string `yaml:"client"`  // ip:port of the client
	Service  string `yaml:"service"` // virtual ip:port
	Protocol string `yaml:"protocol"`
	Src      scenarios.Src
}

// CloseConn closes a connection opened by Connect.
type CloseConn struct {
	Name string `yaml:"name"`
	Src  scenarios.Src
}

// conns is which connections are open, and were ever opened, at this point
// of the timeline while it is validated.
type conns struct{ open, opened map[string]bool }

type connsKey struct{}

func connsOf(v *scenarios.Validator) *conns {
	return v.Scratch(connsKey{}, func() any { return &conns{open: map[string]bool{}, opened: map[string]bool{}} }).(*conns)
}

type connectStep struct {
	Connect *Connect `yaml:"connect"`
}

func (cs *connectStep) Validate(v *scenarios.Validator) {
	c := cs.Connect
	if c == nil {
		return
	}
	st := connsOf(v)
	if c.Name == "" {
		v.Errorf(c.Src.At("name"), "required: a connection name")
	} else if st.open[c.Name] {
		v.Errorf(c.Src.At("name"), "connection %q is already open", c.Name)
	}
	st.open[c.Name] = true
	st.opened[c.Name] = true
	for _, f := range []struct{ key, val string }{{"client", c.Client}, {"service", c.Service}} {
		if _, _, err := splitHostPort(f.val); err != nil {
			v.Errorf(c.Src.At(f.key), "%v", err)
		}
	}
	switch c.Protocol {
	case "":
		c.Protocol = "TCP"
	case "TCP", "UDP":
	default:
		v.Errorf(c.Src.At("protocol"), "want TCP or UDP, got %q", c.Protocol)
	}
}

func (cs *connectStep) Do(r *replay.Run) error {
	c, d := cs.Connect, dataplaneOf(r)
	if c == nil {
		return nil
	}
	if d.traffic == nil {
		return fmt.Errorf("the %s dataplane cannot open connections", d.name)
	}
	res := d.traffic.Connect(c.Name, c.Protocol, c.Client, c.Service)
	d.conns[c.Name] = res
	e := trace.Event{Kind: trace.Conn, Op: "connect", Object: c.Name, Detail: fmt.Sprintf("%s %s -> %s", c.Protocol, c.Client, c.Service)}
	if res.Err != nil {
		e.Err = res.Err.Error()
	} else {
		e.Detail += fmt.Sprintf(" served by %s after %v", res.Server, res.Latency)
	}
	r.Trace(e)
	return nil
}

type closeStep struct {
	Close *CloseConn `yaml:"close"`
}

func (cs *closeStep) Validate(v *scenarios.Validator) {
	c := cs.Close
	if c == nil {
		return
	}
	st := connsOf(v)
	if !st.open[c.Name] {
		v.Errorf(c.Src.At("name"), "no open connection named %q", c.Name)
	}
	delete(st.open, c.Name)
}

func (cs *closeStep) Do(r *replay.Run) error {
	d := dataplaneOf(r)
	if cs.Close == nil {
		return nil
	}
	if d.traffic == nil {
		return fmt.Errorf("the %s dataplane cannot close connections", d.name)
	}
	r.Trace(trace.Event{Kind: trace.Conn, Op: "close", Object: cs.Close.Name})
	return d.traffic.Close(cs.Close.Name)
}

// opsFault makes the next N dataplane write operations fail:
// `fault: {dataplaneOps: N}`.
type opsFault struct {
	DataplaneOps int `yaml:"dataplaneOps"`
	Src          scenarios.Src
}

func (f *opsFault) Validate(v *scenarios.Validator) {
	switch {
	case f.DataplaneOps < 0:
		v.Errorf(f.Src.At("dataplaneOps"), "must not be negative")
	case f.DataplaneOps == 0:
		// A fault of no operations would inject nothing: a typo, not a story.
		v.Errorf(f.Src.At("dataplaneOps"), "want at least 1 failing operation (or leave dataplaneOps out)")
	}
}

func (f *opsFault) Do(r *replay.Run) error {
	if n := f.DataplaneOps; n > 0 {
		r.Step("fault", "", fmt.Sprintf("next %d dataplane operations fail", n))
		dataplaneOf(r).faults.FailNext(n)
	}
	return nil
}

func splitHostPort(s string) (string, uint16, error) {
	h, p, err := net.SplitHostPort(s)
	if err != nil || net.ParseIP(h) == nil {
		return "", 0, fmt.Errorf("want ip:port, got %q", s)
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return "", 0, fmt.Errorf("want ip:port with a port 1-65535, got %q", s)
	}
	return h, uint16(n), nil
}

// HasGolden reports whether an IPVS scenario checks the table anywhere.
func HasGolden(s *scenarios.Scenario) bool {
	for _, st := range s.Timeline {
		if st.Expect == nil {
			continue
		}
		for _, c := range st.Expect.Checks {
			if t, ok := c.(*tableExpect); ok && t.golden().Given() {
				return true
			}
		}
	}
	return false
}

// HasTraffic reports whether an IPVS scenario opens or closes connections:
// on a real kernel such a story needs a client (OnKernelWithClient) and
// runs in real time (TIME_WAIT lasts real minutes).
func HasTraffic(s *scenarios.Scenario) bool {
	for _, st := range s.Timeline {
		for _, a := range st.Actions {
			switch a.(type) {
			case *connectStep, *closeStep:
				return true
			}
		}
	}
	return false
}
