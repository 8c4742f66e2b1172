package fakes

import "github.com/proxysim/proxysim/sim/ipvs"

var (
	_ ipvs.Sender        = (*IPVS)(nil)
	_ ipvs.TimeoutReader = (*IPVS)(nil)
)

// ReadTimeouts reports the timeouts in force: the kernel's defaults unless
// SetTimeouts changed them.
func (f *IPVS) ReadTimeouts() (ipvs.Timeouts, error) { return f.Timeouts(), nil }
