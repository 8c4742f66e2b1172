package iptablesmode

import (
	"fmt"
	"net"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim/iptables"
)

// Connection is a client's connection that the kernel sent to one
// endpoint: `connection: {from: IP, to: VIP:PORT, protocol, endpoint:
// IP:PORT}`. The endpoint must be one the rules can reach now; the
// connection then leaves what its path sets in the kernel's `recent` lists
// (ClientIP affinity), so that later routes from the same client see it.
type Connection struct {
	From     string `yaml:"from"`
	To       string `yaml:"to"`
	Protocol string `yaml:"protocol"`
	Endpoint string `yaml:"endpoint"`
	Src      scenarios.Src

	pkt iptables.Packet
}

type connectionStep struct {
	Connection *Connection `yaml:"connection"`
	Src        scenarios.Src
}

func (c *connectionStep) Validate(v *scenarios.Validator) {
	cn := c.Connection
	if cn == nil {
		return
	}
	cn.pkt = validatePacket(v, cn.Src, cn.From, cn.To, cn.Protocol)
	if cn.Endpoint == "" {
		v.Errorf(cn.Src.At("endpoint"), "required: the endpoint ip:port the connection went to")
	} else if host, _, err := net.SplitHostPort(cn.Endpoint); err != nil || net.ParseIP(host) == nil {
		v.Errorf(cn.Src.At("endpoint"), "want an endpoint ip:port, got %q", cn.Endpoint)
	}
}

func (c *connectionStep) Do(r *replay.Run) error {
	cn := c.Connection
	if cn == nil {
		return nil
	}
	d := dataplaneOf(r)
	shares, sets, err := d.Route(cn.pkt)
	if err != nil {
		return fmt.Errorf("connection: %w", err)
	}
	r.Step("connection", "", fmt.Sprintf("%s -> %s via %s", cn.From, cn.Endpoint, cn.To))
	if s := shares[cn.Endpoint]; s == nil || s.Sign() == 0 {
		// The kernel could not have picked it: a failed check, not a
		// broken scenario, so that a wrong endpoint shows both sides.
		r.Fail(cn.Src.At("endpoint"), "connection.endpoint", "a route to "+cn.Endpoint, shares.String())
		return nil
	}
	d.history().Remember(cn.pkt.Src, sets[cn.Endpoint])
	return nil
}
