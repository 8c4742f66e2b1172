package proxy

import (
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Backend programs one kind of dataplane (IPVS, iptables, ...) from the
// applied state. Sync is called with the proxier's lock held and must not
// call back into the proxier.
type Backend interface {
	Sync(s *SyncState) error
}

// SyncState is what a backend sees at each sync.
type SyncState struct {
	Services  ServiceMap
	Endpoints EndpointsMap
	// What changed since the previous sync.
	ServiceChanges   ServiceMapResult
	EndpointsChanges EndpointsMapResult
	NodeName, Zone   string
	// ports indexes Services by service.
	ports map[types.NamespacedName][]ServicePortName
}

// PortsOf lists a service's ports in Services, sorted, without scanning
// them all: what a backend doing partial syncs needs.
func (s *SyncState) PortsOf(name types.NamespacedName) []ServicePortName { return s.ports[name] }

// ServicePortsIndex is every service with ports in Services, and its ports.
func (s *SyncState) ServicePortsIndex() map[types.NamespacedName][]ServicePortName { return s.ports }

// Changed lists the services whose ports or endpoints changed since the
// previous sync, sorted.
func (s *SyncState) Changed() []types.NamespacedName {
	seen := map[types.NamespacedName]bool{}
	var out []types.NamespacedName
	for _, l := range [][]types.NamespacedName{s.ServiceChanges.Updated, s.EndpointsChanges.Updated} {
		for _, n := range l {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	slices.SortFunc(out, CompareNames)
	return out
}

// Syncer is what a proxier asks to schedule syncs: a runner.
type Syncer interface{ Run() }

// Observer hears each tracker update before the proxier asks for a sync:
// kube-proxy's trackers set their change metrics inside Update, before
// the event handler calls Sync (servicechangetracker.go Update,
// endpointschangetracker.go EndpointSliceUpdate), and a sync that runs at
// once must find them set, so that its checkout resets them.
type Observer interface {
	// ServiceTracked: a Service event was tracked, leaving pending
	// Services with a net change.
	ServiceTracked(pending int)
	// SliceTracked: a well-formed slice event was tracked; changed when
	// it changed what is pending.
	SliceTracked(s *discovery.EndpointSlice, changed bool)
}

// Proxier is the backend-neutral half of a service proxy: informer event
// handlers, change trackers, initialization gating and the sync entry point.
//
// Until both the service and the EndpointSlice informers have synced, events
// are tracked but no sync is requested; the second of OnServicesSynced and
// OnEndpointSlicesSynced syncs directly, once. After that every event that
// leaves a change pending asks the Syncer for a run.
type Proxier struct {
	mu        sync.Mutex
	services  *ServiceChangeTracker
	endpoints *EndpointSliceTracker
	svcMap    ServiceMap
	epMap     EndpointsMap
	ports     map[types.NamespacedName][]ServicePortName
	backend   Backend
	syncer    Syncer
	nodeName  string
	zone      string

	nEndpoints int // endpoints in epMap, kept by each sync for Size

	observer Observer

	servicesSynced, endpointsSynced bool
	initialized                     bool
	syncs                           int
	// sliceChanged is what the last slice event did to the pending state.
	sliceChanged bool
}

// NewProxier builds a proxier for one IP family on one node.
func NewProxier(family Family, nodeName, zone string, backend Backend, opts EndpointSliceTrackerOptions) *Proxier {
	return &Proxier{
		services:  NewServiceChangeTracker(family),
		endpoints: NewEndpointSliceTracker(family, nodeName, opts),
		svcMap:    ServiceMap{},
		epMap:     EndpointsMap{},
		ports:     map[types.NamespacedName][]ServicePortName{},
		backend:   backend,
		nodeName:  nodeName,
		zone:      zone,
	}
}

// SetSyncer connects the runner; it must be set before events arrive.
func (p *Proxier) SetSyncer(s Syncer) { p.syncer = s }

// Initialized reports whether both informers have synced.
func (p *Proxier) Initialized() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.initialized
}

func (p *Proxier) request(pending bool) {
	p.mu.Lock()
	ok := pending && p.initialized
	p.mu.Unlock()
	if ok && p.syncer != nil {
		p.syncer.Run()
	}
}

// SetObserver connects an observer of the trackers; set it before events
// arrive.
func (p *Proxier) SetObserver(o Observer) { p.observer = o }

func (p *Proxier) OnServiceAdd(s *v1.Service)         { p.onService(nil, s) }
func (p *Proxier) OnServiceUpdate(old, s *v1.Service) { p.onService(old, s) }
func (p *Proxier) OnServiceDelete(s *v1.Service)      { p.onService(s, nil) }

func (p *Proxier) onService(old, s *v1.Service) {
	pending := p.services.Update(old, s)
	if p.observer != nil {
		p.observer.ServiceTracked(p.services.Pending())
	}
	p.request(pending)
}

// OnEndpointSliceAdd and friends report a malformed slice as an error; the
// slice is ignored, as kube-proxy ignores it.
func (p *Proxier) OnEndpointSliceAdd(s *discovery.EndpointSlice) error {
	return p.onSlice(s, false)
}
func (p *Proxier) OnEndpointSliceUpdate(_, s *discovery.EndpointSlice) error {
	return p.onSlice(s, false)
}
func (p *Proxier) OnEndpointSliceDelete(s *discovery.EndpointSlice) error {
	return p.onSlice(s, true)
}

func (p *Proxier) onSlice(s *discovery.EndpointSlice, remove bool) error {
	changed, err := p.endpoints.Update(s, remove)
	p.mu.Lock()
	p.sliceChanged = changed
	p.mu.Unlock()
	if err == nil && p.observer != nil {
		p.observer.SliceTracked(s, changed)
	}
	p.request(changed)
	return err
}

// OnServicesSynced and OnEndpointSlicesSynced mark an informer's initial list
// done; the second one to arrive syncs directly and reports its result.
func (p *Proxier) OnServicesSynced() error { return p.markSynced(&p.servicesSynced) }
func (p *Proxier) OnEndpointSlicesSynced() error {
	return p.markSynced(&p.endpointsSynced)
}

func (p *Proxier) markSynced(flag *bool) error {
	p.mu.Lock()
	*flag = true
	p.initialized = p.servicesSynced && p.endpointsSynced
	ready := p.initialized
	p.mu.Unlock()
	if !ready {
		return nil
	}
	return p.SyncProxyRules()
}

// SyncProxyRules applies pending changes and programs the backend. Before
// both informers have synced it does nothing.
func (p *Proxier) SyncProxyRules() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.initialized {
		return nil
	}
	p.syncs++
	epChanges, delta := p.epMap.update(p.endpoints)
	p.nEndpoints += delta
	st := &SyncState{
		Services:         p.svcMap,
		Endpoints:        p.epMap,
		ServiceChanges:   p.svcMap.Update(p.services),
		EndpointsChanges: epChanges,
		NodeName:         p.nodeName,
		Zone:             p.zone,
		ports:            p.ports,
	}
	for name, ports := range st.ServiceChanges.Ports {
		if len(ports) == 0 {
			delete(p.ports, name)
		} else {
			p.ports[name] = ports
		}
	}
	return p.backend.Sync(st)
}

// PendingServices reports how many Services have a net change waiting
// (kube-proxy's service_changes_pending).
func (p *Proxier) PendingServices() int { return p.services.Pending() }

// LastSliceChanged reports whether the last slice event changed what is
// pending (what kube-proxy's endpoint_changes_pending counts).
func (p *Proxier) LastSliceChanged() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sliceChanged
}

// Size reports the applied number of service ports and endpoints, for sync
// cost models.
func (p *Proxier) Size() (servicePorts, endpoints int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.svcMap), p.nEndpoints
}

// Syncs counts the syncs that ran (direct or through the runner).
func (p *Proxier) Syncs() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.syncs
}
