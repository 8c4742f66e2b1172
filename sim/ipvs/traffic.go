package ipvs

import "time"

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
	// Err is set when no connection was made: refused or timed out.
	Err error
}

// ConnInfo is one connection as IPVS sees it.
type ConnInfo struct {
	Server string
	State  string // ESTABLISHED, FIN_WAIT, TIME_WAIT, CLOSE, UDP, or GONE
}
