package ipvs

import "time"

// What an operator or a test sees of a node's IPVS beyond what the proxier
// programs, implemented by the fake (fakes/) and the real kernel (netns/)
// alike, so that one scenario checks both.

// Sender sends on open connections and aborts them.
type Sender interface {
	// Ping sends data on an open connection and waits up to timeout for
	// the answer: nil when it was delivered, ErrReset, or ErrTimeout when
	// nothing came back (the packet was dropped).
	Ping(name string, timeout time.Duration) error
	// Reset aborts a connection with a RST from the client.
	Reset(name string) error
	// Abandon makes the client forget a connection without a word (no
	// FIN, no RST): its IPVS entry stays ESTABLISHED, as when a client's
	// socket or whole namespace goes away, until it expires or a packet
	// from the same address and port comes.
	Abandon(name string) error
	// Shutdown closes the client's sending side (a FIN) while the server
	// keeps its own side open: the entry waits in CLOSE_WAIT.
	Shutdown(name string) error
}

// TimeoutReader reads the timeouts in force, as `ipvsadm -L --timeout`
// shows them.
type TimeoutReader interface {
	ReadTimeouts() (Timeouts, error)
}

// Kernel defaults of the IPVS timeouts (include/net/ip_vs.h,
// net/netfilter/ipvs/ip_vs_proto_tcp.c and ip_vs_proto_udp.c).
const (
	KernelTCPTimeout    = 15 * time.Minute
	KernelTCPFinTimeout = 2 * time.Minute
	KernelUDPTimeout    = 5 * time.Minute
)
