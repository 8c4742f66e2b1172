package clustergen

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// ClusterLoader2's load test (perf-tests clusterloader2/testing/load/
// config.yaml) fills namespaces of 100 nodes' worth of pods with
// Deployments of three sizes (small, medium, big) and puts a Service in
// front of about half of each size, one Service per Deployment. A Spec
// with Deployments makes that shape: every namespace alike, the
// Deployments in order of size, the first ones of each size with a
// Service of their name.

// Deployment is one generated Deployment: its pods are Name-0, Name-1, ...
// labelled app: Name; its Service, if it has one, is named Name too and
// selects them.
type Deployment struct {
	Namespace, Name string
	Replicas        int
	// Service is the index of its Service in Cluster.Services, or -1.
	Service int
}

// Naming of the Deployments' objects.
const (
	deploymentNameFormat = "dep-%05d"
	namespaceNameFormat  = "%s-%03d"
)

// NamespaceName is generated namespace i of a Deployments spec: prefix-000,
// prefix-001, ...
func NamespaceName(prefix string, i int) string { return fmt.Sprintf(namespaceNameFormat, prefix, i) }

// checkDeployments reports what is wrong with a Deployments spec, and sets
// its defaults; it runs before the Services' defaults are applied.
func checkDeployments(errs *Errors, s *Spec) {
	if s.Services != 0 {
		errs.add("services", "give services (each with its own endpoints) or deployments, not both")
	}
	if len(s.EndpointsPerService) > 0 {
		errs.add("endpointsPerService", "a Deployment's Service has its replicas as endpoints: leave endpointsPerService out")
	}
	if s.Namespaces == 0 {
		s.Namespaces = 1
	}
	if s.Namespaces < 0 || s.Namespaces > MaxNamespaces {
		errs.add("namespaces", "want 1 to %d namespaces, got %d", MaxNamespaces, s.Namespaces)
	} else if msgs := validateName(NamespaceName(s.Namespace, s.Namespaces-1)); len(msgs) > 0 {
		errs.add("namespace", "the namespaces would be named %s: %s", NamespaceName(s.Namespace, s.Namespaces-1), msgs[0])
	}
	if s.WithService < 0 || s.WithService > 100_00 {
		errs.add("withService", "want a share from 0 to 10000 hundredths of a percent, got %d", s.WithService)
	}
	perNamespace := 0
	for _, r := range slices.Sorted(maps.Keys(s.Deployments)) {
		c := s.Deployments[r]
		at := "deployments." + strconv.Itoa(r)
		if r < 0 || r > MaxEndpoints {
			errs.add(at, "want 0 to %d replicas, got %d", MaxEndpoints, r)
		}
		if c < 0 || c > MaxServices {
			errs.add(at, "want 0 to %d Deployments of %d replicas, got %d", MaxServices, r, c)
			continue
		}
		perNamespace += c
	}
	if perNamespace == 0 {
		errs.add("deployments", "no Deployments: give at least one replica count a number of Deployments")
	} else if int64(perNamespace)*int64(max(s.Namespaces, 1)) > MaxServices {
		errs.add("deployments", "%d Deployments in each of %d namespaces: at most %d in all", perNamespace, s.Namespaces, MaxServices)
	}
	s.Pods = true
}

// planDeployments lays out the Deployments, namespace by namespace, and the
// Services in front of them; the Services' endpoints are their
// Deployment's replicas. It returns how many pods there are in all.
func (p *planned) planDeployments() int {
	sizes := slices.Sorted(maps.Keys(p.Deployments))
	pods := 0
	for ns := range p.Namespaces {
		namespace := NamespaceName(p.Namespace, ns)
		k := 0 // the Deployment's number in its namespace
		for _, r := range sizes {
			c := p.Deployments[r]
			// Rounded up, as the load test's (n+1)/2 Services for n
			// Deployments of a size.
			serviced := (c*p.WithService + 100_00 - 1) / 100_00
			for j := range c {
				d := Deployment{Namespace: namespace, Name: fmt.Sprintf(deploymentNameFormat, k), Replicas: r, Service: -1}
				if j < serviced {
					d.Service = len(p.serviceDeps)
					p.serviceDeps = append(p.serviceDeps, len(p.deployments))
					p.endpoints = append(p.endpoints, r)
				}
				p.deployments = append(p.deployments, d)
				pods += r
				k++
			}
		}
	}
	p.Services = len(p.serviceDeps)
	return pods
}

// buildDeployments makes the Services in front of Deployments, then every
// Deployment's pods in order.
func (p *planned) buildDeployments(c *Cluster, nodeNames, zones []string) {
	port := 0
	for i := range p.Services {
		c.Services[i] = p.service(i, p.protocols[port:port+p.ports[i]])
		port += p.ports[i]
	}
	// A Deployment without a Service still declares a port, as the load
	// test's pause pods do.
	bare := []v1.ContainerPort{{Name: "port-0", ContainerPort: 8080, Protocol: v1.ProtocolTCP}}
	ep := 0
	for i, d := range p.deployments {
		ports := bare
		if d.Service >= 0 {
			ports = containerPorts(c.Services[d.Service])
		}
		c.Pods = append(c.Pods, p.pods(d.Namespace, d.Name, ports, p.conditions[ep:ep+d.Replicas], p.firstNode[i], nodeNames, zones)...)
		ep += d.Replicas
	}
	c.Deployments = p.deployments
}
