package ipvs

import (
	"errors"
	"time"
)

// Traffic opens and closes client connections through an IPVS dataplane:
// the in-memory model in fakes/, or real sockets in network namespaces.
type Traffic interface {
	// Connect opens a connection from client ("ip:port") to service
	// ("vip:port") and reports which real server took it and how long the
	// connect took.
	Connect(name, protocol, client, service string) ConnectResult
	// Close closes the connection from the client side.
	Close(name string) error
	// Conn reports the state IPVS holds for a connection.
	Conn(name string) (ConnInfo, bool)
}

// ConnectResult is the outcome of a connect.
type ConnectResult struct {
	// Server is the real server ("ip:port") that accepted the connection.
	Server string
	// Latency is how long the connect took: 0 when the first SYN was
	// answered, about 1s when it was dropped once, and so on.
	Latency time.Duration
	// Err is set when no connection was made: ErrRefused or ErrTimeout
	// (a real kernel's socket error is kept inside, for errors.Is).
	Err error
}

// ConnInfo is one connection as IPVS sees it.
type ConnInfo struct {
	Server string
	State  string // ESTABLISHED, FIN_WAIT, TIME_WAIT, CLOSE, UDP, or GONE
	// Expires is how long until the entry expires by itself; 0 when it
	// does not (the fake's ESTABLISHED entries, kept alive by their client).
	Expires time.Duration
}

// How connections fail, in words every Traffic implementation shares, so
// callers compare with errors.Is whatever the dataplane.
var (
	// ErrRefused: the connect was answered with a reset (no destination).
	ErrRefused = errors.New("connection refused")
	// ErrTimeout: nothing answered in time (dropped SYNs or packets).
	ErrTimeout = errors.New("connection timed out")
	// ErrReset: an open connection's next packet was reset, as when the
	// kernel has dropped its IPVS entry and the local stack answers.
	ErrReset = errors.New("connection reset by peer")
)
