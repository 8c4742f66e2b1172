package fakes

import (
	"fmt"
	"sort"
	"sync"

	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/sim/ipvs"
)

// DefaultSysctls are the values a fresh network namespace has on Linux 6.1,
// as measured in the VM (see docs/explanation/kernel-suite.md).
func DefaultSysctls() map[string]int {
	return map[string]int{
		ipvs.SysctlConntrack:               0,
		ipvs.SysctlConnReuseMode:           1,
		ipvs.SysctlExpireNodestConn:        0,
		ipvs.SysctlExpireQuiescentTemplate: 0,
		ipvs.SysctlIPForward:               0,
		ipvs.SysctlArpIgnore:               0,
		ipvs.SysctlArpAnnounce:             0,
	}
}

// Sysctls is one network namespace's sysctls.
type Sysctls struct {
	mu     sync.Mutex
	values map[string]int
}

var _ ipvs.Sysctl = (*Sysctls)(nil)

// NewSysctls starts from DefaultSysctls; conn_reuse_mode does not exist on
// kernels before 4.1.
func NewSysctls(kernel string) *Sysctls {
	v := DefaultSysctls()
	if kv, err := ipvs.ParseKernelVersion(kernel); err == nil && !kv.AtLeast(4, 1) {
		delete(v, ipvs.SysctlConnReuseMode)
	}
	return &Sysctls{values: v}
}

func (s *Sysctls) Get(name string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.values[name]
	if !ok {
		return 0, fmt.Errorf("open /proc/sys/%s: no such file or directory", name)
	}
	return v, nil
}

func (s *Sysctls) Set(name string, value int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.values[name]; !ok {
		return fmt.Errorf("open /proc/sys/%s: no such file or directory", name)
	}
	s.values[name] = value
	return nil
}

// Dummy is a fake set of devices and their addresses.
type Dummy struct {
	mu      sync.Mutex
	devices map[string]map[string]bool
}

var _ ipvs.AddressBinder = (*Dummy)(nil)

func NewDummy() *Dummy { return &Dummy{devices: map[string]map[string]bool{}} }

func (d *Dummy) EnsureDevice(dev string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.devices[dev] == nil {
		d.devices[dev] = map[string]bool{}
	}
	return nil
}

func (d *Dummy) Addresses(dev string) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	addrs, ok := d.devices[dev]
	if !ok {
		return nil, fmt.Errorf("link %s not found", dev)
	}
	out := make([]string, 0, len(addrs))
	for a := range addrs {
		out = append(out, a)
	}
	sort.Strings(out)
	return out, nil
}

func (d *Dummy) Bind(dev, addr string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.devices[dev] == nil {
		return fmt.Errorf("link %s not found", dev)
	}
	d.devices[dev][addr] = true
	return nil
}

func (d *Dummy) Unbind(dev, addr string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.devices[dev][addr] {
		return fmt.Errorf("address %s not on %s", addr, dev)
	}
	delete(d.devices[dev], addr)
	return nil
}

// Dataplane returns a complete fake IPVS dataplane for a kernel version,
// whose connections age on clk (the world's clock; nil: they never expire).
func Dataplane(kernel string, clk clock.PassiveClock) (ipvs.Dataplane, *IPVS, *Sysctls, *Dummy) {
	s, d := NewSysctls(kernel), NewDummy()
	h := NewIPVS(kernel, s, clk)
	return ipvs.Dataplane{IPVS: h, Addresses: d, Sysctl: s, KernelVersion: kernel}, h, s, d
}
