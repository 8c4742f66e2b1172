package ingress

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"net"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networking "k8s.io/api/networking/v1"
)

// Names the controller gives its built-in pieces (controller.go: the
// constants defUpstreamName and defServerName).
const (
	DefaultBackendName = "upstream-default-backend"
	CatchAllServer     = "_"
	// defaultBackendEndpoint is where the built-in default backend listens
	// when no --default-backend-service is given (controller.go
	// getDefaultUpstream).
	defaultBackendEndpoint = "127.0.0.1:8181"
)

// Configuration is the part of ingress-nginx's ingress.Configuration
// (pkg/apis/ingress/types.go) that the sync loop's decisions read: servers
// with their locations, backends with their endpoints, and the checksum of
// the controller's ConfigMap. Slices are kept sorted, so that two builds of
// the same cluster are deep-equal, as Configuration.Equal
// (pkg/apis/ingress/types_equals.go) finds them whatever their order.
type Configuration struct {
	Servers  []Server  `json:"servers"`
	Backends []Backend `json:"backends"`
	// BackendConfigChecksum stands for the controller ConfigMap's content.
	BackendConfigChecksum string `json:"backendConfigChecksum"`
}

// Server is one virtual host.
type Server struct {
	Hostname  string     `json:"hostname"`
	Locations []Location `json:"locations"`
}

// Location is one path of a server. Settings are the location-level
// annotations as parsed (every annotation of the prefix that is not a
// backend one): a change to any of them changes the location, and so needs
// a reload.
type Location struct {
	Path     string            `json:"path"`
	PathType string            `json:"pathType"`
	Backend  string            `json:"backend"`
	Settings map[string]string `json:"settings,omitempty"`
}

// Backend is one upstream: a service port and its endpoints. Settings are
// the backend-level annotations (load balancing, affinity, hashing), which
// ingress-nginx keeps in ingress.Backend and so changes without a reload.
type Backend struct {
	Name      string            `json:"name"`
	Service   string            `json:"service,omitempty"`
	Port      string            `json:"port,omitempty"`
	Endpoints []string          `json:"endpoints,omitempty"` // "ip:port", sorted
	Settings  map[string]string `json:"settings,omitempty"`
}

// Equal reports whether two configurations are the same, as
// Configuration.Equal does for the fields modelled.
func (c *Configuration) Equal(o *Configuration) bool { return reflect.DeepEqual(c, o) }

// IsEmpty reports whether c is the empty configuration the controller
// starts with (controller.go syncIngress's first-sync test).
func (c *Configuration) IsEmpty() bool { return c.Equal(&Configuration{}) }

// DynamicEnough reports whether going from running to next needs no
// reload: the two are equal once their backends are set aside
// (pkg/util/ingress/ingress.go IsDynamicConfigurationEnough, which also
// clears L4 endpoints and certificates, neither modelled here).
func DynamicEnough(next, running *Configuration) bool {
	a, b := *next, *running
	a.Backends, b.Backends = nil, nil
	return a.Equal(&b)
}

// BackendsEqual reports whether the backends differ, the test
// configureDynamically (nginx.go) makes before posting them.
func BackendsEqual(a, b *Configuration) bool { return reflect.DeepEqual(a.Backends, b.Backends) }

// Hash is the configuration's hash, the value of the config_hash metric.
// ingress-nginx hashes its whole ingress.Configuration with hashstructure;
// this is FNV-64a of the model's JSON, so the numbers differ from a real
// controller's but change exactly when the model does.
func (c *Configuration) Hash() uint64 {
	b, err := json.Marshal(c)
	if err != nil {
		panic(err) // plain strings and maps only
	}
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// Backend returns the backend with the given name.
func (c *Configuration) Backend(name string) (Backend, bool) {
	i, ok := slices.BinarySearchFunc(c.Backends, name, func(b Backend, n string) int { return strings.Compare(b.Name, n) })
	if !ok {
		return Backend{}, false
	}
	return c.Backends[i], true
}

// Route finds the backend serving host and path: the server for the host
// (else the catch-all), then its location with that exact path.
func (c *Configuration) Route(host, path string) (string, bool) {
	for _, want := range []string{host, CatchAllServer} {
		for _, s := range c.Servers {
			if s.Hostname != want {
				continue
			}
			for _, l := range s.Locations {
				if l.Path == path {
					return l.Backend, true
				}
			}
		}
	}
	return "", false
}

// backendAnnotations are the annotations (after the prefix) that
// ingress-nginx parses into ingress.Backend rather than a Location or a
// Server (pkg/apis/ingress/types.go Backend: SessionAffinity,
// UpstreamHashBy, LoadBalancing), so that changing one only changes
// backends.
var backendAnnotations = map[string]bool{
	"load-balance":                             true,
	"upstream-hash-by":                         true,
	"upstream-hash-by-subset":                  true,
	"upstream-hash-by-subset-size":             true,
	"affinity":                                 true,
	"affinity-mode":                            true,
	"affinity-canary-behavior":                 true,
	"session-cookie-name":                      true,
	"session-cookie-path":                      true,
	"session-cookie-domain":                    true,
	"session-cookie-samesite":                  true,
	"session-cookie-conditional-samesite-none": true,
	"session-cookie-max-age":                   true,
	"session-cookie-expires":                   true,
	"session-cookie-change-on-failure":         true,
	"session-cookie-secure":                    true,
}

// listers is what a build reads: the store's caches.
type listers struct {
	ingresses map[string]*networking.Ingress // admitted ones only
	services  map[string]*v1.Service
	slices    map[string]map[string]*discovery.EndpointSlice // service key -> slice name -> slice
	configMap *v1.ConfigMap
}

// sliceVersion is the change instant of each slice a build read, keyed
// "ns/name": what latency is measured from.
type sliceVersions map[string]int64

// build makes the configuration from the listers, as getConfiguration
// (controller.go) does for the parts modelled: one backend per service
// port an ingress names, plus the default backend; one server per host,
// plus the catch-all, each with a root location on the default backend
// unless a rule gives one.
func build(l *listers, prefix string, versions func(sliceKey string) int64) (*Configuration, sliceVersions) {
	cfg := &Configuration{}
	used := sliceVersions{}
	backends := map[string]*Backend{
		DefaultBackendName: {Name: DefaultBackendName, Endpoints: []string{defaultBackendEndpoint}},
	}
	servers := map[string]map[string]Location{CatchAllServer: {}}
	for _, key := range slices.Sorted(maps.Keys(l.ingresses)) {
		ing := l.ingresses[key]
		locSettings, beSettings := splitAnnotations(ing.Annotations, prefix)
		addBackend := func(b *networking.IngressServiceBackend) string {
			if b == nil {
				return DefaultBackendName
			}
			port := b.Port.Name
			if port == "" {
				port = strconv.Itoa(int(b.Port.Number))
			}
			// controller.go upstreamName: namespace-service-port.
			name := fmt.Sprintf("%s-%s-%s", ing.Namespace, b.Name, port)
			if _, ok := backends[name]; !ok {
				svcKey := ing.Namespace + "/" + b.Name
				be := &Backend{Name: name, Service: svcKey, Port: port}
				be.Endpoints = endpointsOf(l, svcKey, b.Port, used, versions)
				backends[name] = be
			}
			// Backend annotations of the first ingress naming it win, as
			// createUpstreams fills a backend once.
			if be := backends[name]; be.Settings == nil && len(beSettings) > 0 {
				be.Settings = beSettings
			}
			return name
		}
		if d := ing.Spec.DefaultBackend; d != nil && d.Service != nil {
			// An ingress's default backend serves the catch-all's root.
			name := addBackend(d.Service)
			servers[CatchAllServer]["/"] = Location{Path: "/", PathType: string(networking.PathTypePrefix), Backend: name, Settings: locSettings}
		}
		for _, rule := range ing.Spec.Rules {
			host := rule.Host
			if host == "" {
				host = CatchAllServer
			}
			if servers[host] == nil {
				servers[host] = map[string]Location{}
			}
			if rule.HTTP == nil {
				continue
			}
			for _, p := range rule.HTTP.Paths {
				path := p.Path
				if path == "" {
					path = "/"
				}
				if _, taken := servers[host][path]; taken {
					continue // the first ingress (by key) keeps a path
				}
				pt := string(networking.PathTypePrefix)
				if p.PathType != nil {
					pt = string(*p.PathType)
				}
				servers[host][path] = Location{Path: path, PathType: pt, Backend: addBackend(p.Backend.Service), Settings: locSettings}
			}
		}
	}
	for _, host := range slices.Sorted(maps.Keys(servers)) {
		locs := servers[host]
		if _, ok := locs["/"]; !ok {
			locs["/"] = Location{Path: "/", PathType: string(networking.PathTypePrefix), Backend: DefaultBackendName}
		}
		s := Server{Hostname: host}
		for _, p := range slices.Sorted(maps.Keys(locs)) {
			s.Locations = append(s.Locations, locs[p])
		}
		cfg.Servers = append(cfg.Servers, s)
	}
	for _, name := range slices.Sorted(maps.Keys(backends)) {
		cfg.Backends = append(cfg.Backends, *backends[name])
	}
	if cm := l.configMap; cm != nil {
		h := fnv.New64a()
		for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
			fmt.Fprintf(h, "%s=%s\n", k, cm.Data[k])
		}
		cfg.BackendConfigChecksum = strconv.FormatUint(h.Sum64(), 16)
	}
	return cfg, used
}

// splitAnnotations parses an ingress's annotations of the prefix into
// location and backend settings; other annotations mean nothing to the
// configuration.
func splitAnnotations(anns map[string]string, prefix string) (loc, be map[string]string) {
	for k, v := range anns {
		name, ok := strings.CutPrefix(k, prefix+"/")
		if !ok {
			continue
		}
		target := &loc
		if backendAnnotations[name] {
			target = &be
		}
		if *target == nil {
			*target = map[string]string{}
		}
		(*target)[name] = v
	}
	return loc, be
}

// endpointsOf lists a service port's endpoints from its EndpointSlices, as
// getEndpointsFromSlices (endpointslices.go) does: an endpoint whose ready
// condition is unset or true, every address of it, on the slice port named
// like the service port; duplicates once. Zone hints are not modelled.
func endpointsOf(l *listers, svcKey string, port networking.ServiceBackendPort, used sliceVersions, versions func(string) int64) []string {
	svc := l.services[svcKey]
	if svc == nil {
		return nil
	}
	var sp *v1.ServicePort
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if (port.Name != "" && p.Name == port.Name) || (port.Name == "" && p.Port == port.Number) {
			sp = p
			break
		}
	}
	if sp == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	byName := l.slices[svcKey]
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		s := byName[name]
		key := s.Namespace + "/" + s.Name
		used[key] = versions(key)
		if s.AddressType != discovery.AddressTypeIPv4 && s.AddressType != discovery.AddressTypeIPv6 {
			continue
		}
		for _, p := range s.Ports {
			pname := ""
			if p.Name != nil {
				pname = *p.Name
			}
			if pname != sp.Name || p.Port == nil {
				continue
			}
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
					continue
				}
				for _, a := range ep.Addresses {
					hp := net.JoinHostPort(a, strconv.Itoa(int(*p.Port)))
					if !seen[hp] {
						seen[hp] = true
						out = append(out, hp)
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}
