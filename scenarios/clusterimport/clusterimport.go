// Package clusterimport writes a scenario for one node of a real cluster
// (proxysim import): from a kubectl dump and the node's kube-proxy
// configuration, read through the scenario loader, a skeleton whose golden
// a first replay fills in, so that it loads and replays green.
package clusterimport

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
)

// SnapshotKeyer is implemented by a mode whose golden (its dataplane as
// its tool prints it: ipvs, iptables) a scenario from Import fills in.
type SnapshotKeyer interface {
	SnapshotKey() string
}

// ImportOptions say what Import reads and writes.
type ImportOptions struct {
	Cluster string // a cluster dump: kubectl get ... -o yaml or -o json
	Config  string // a kube-proxy configuration file or ConfigMap
	Node    string // the node whose kube-proxy to replay
	Output  string // the scenario to write
	Strict  bool   // refuse the dump's objects of kinds not modelled, and the configuration's unknown or duplicated fields
}

// Imported is what Import wrote and found.
type Imported struct {
	Scenario *scenarios.Scenario // as loaded after its goldens were filled in
	Result   *replay.Result      // its replay
	Copied   []string            // input files copied next to the scenario, as "SRC to DST"
	Warnings scenarios.Problems
}

// Import writes a scenario skeleton for one node of a cluster: the proxy
// settings from its kube-proxy configuration, the node's name, addresses
// and zone, the dump as its objects, and a timeline of one step whose
// golden a first replay fills in (as --update does), with an example step
// in a comment. The scenario then loads and replays green.
func Import(o ImportOptions) (imp *Imported, err error) {
	outDir := filepath.Dir(o.Output)
	var copied, made []string
	// Nothing half-done: what this call copied or wrote goes on failure.
	defer func() {
		if err != nil {
			for _, f := range made {
				_ = os.Remove(f)
			}
		}
	}()
	cluster, c1, err := placeBeside(o.Cluster, outDir)
	if err != nil {
		return nil, err
	}
	if len(c1) > 0 {
		made = append(made, filepath.Join(outDir, cluster))
	}
	config, c2, err := placeBeside(o.Config, outDir)
	if err != nil {
		return nil, err
	}
	if len(c2) > 0 {
		made = append(made, filepath.Join(outDir, config))
	}
	copied = append(append(copied, c1...), c2...)

	// A first reading of the inputs, through the loader (the same checks
	// and messages as a scenario's): the configuration's mode, the objects,
	// the node.
	mode, err := scenarios.ConfigMode(o.Output, outDir, config, o.Strict)
	if err != nil {
		return nil, err
	}
	m, ok := scenarios.LookupMode(mode)
	if !ok {
		return nil, fmt.Errorf("%s: mode %q is not modelled (modes: %s)", o.Config, mode, scenarios.OrList(scenarios.ModeNames()))
	}
	probe := fmt.Sprintf("name: probe\nproxy:\n  version: v1.34.0\nobjects:\n  - file: %s\ntimeline:\n  - at: 0s\n    note: probe\n", quote(cluster))
	s, err := scenarios.ParseIn(o.Output, []byte(probe), outDir, scenarios.LoadOptions{Strict: o.Strict})
	if err != nil {
		return nil, err
	}
	node, names := findNode(s.Initial, o.Node)
	if node == nil {
		return nil, fmt.Errorf("%s: no Node %q (nodes: %s)", o.Cluster, o.Node, strings.Join(names, ", "))
	}
	s.Proxy.Mode = m.Name()
	text := skeleton(o, s, m, node, cluster, config)
	if _, err := os.Stat(o.Output); err != nil {
		made = append(made, o.Output) // a scenario there before is the user's
	}
	if err := os.WriteFile(o.Output, []byte(text), 0o644); err != nil {
		return nil, err
	}
	// The first replay fills the golden in; the second must pass.
	first, err := scenarios.LoadWith(o.Output, scenarios.LoadOptions{Strict: o.Strict})
	if err != nil {
		return nil, err
	}
	if _, err := replay.Replay(first, replay.Options{Update: true, TraceKeep: 256}); err != nil {
		return nil, err
	}
	final, err := scenarios.LoadWith(o.Output, scenarios.LoadOptions{Strict: o.Strict})
	if err != nil {
		return nil, err
	}
	res, err := replay.Replay(final, replay.Options{TraceKeep: 256})
	if err != nil {
		return nil, err
	}
	return &Imported{Scenario: final, Result: res, Copied: copied, Warnings: final.Warnings}, nil
}

// placeBeside returns the path of file relative to dir, copying it into
// dir when it is elsewhere (a scenario reads only files in its folder).
func placeBeside(file, dir string) (rel string, copied []string, err error) {
	absFile, err1 := filepath.Abs(file)
	absDir, err2 := filepath.Abs(dir)
	if err := errors.Join(err1, err2); err != nil {
		return "", nil, err
	}
	if r, err := filepath.Rel(absDir, absFile); err == nil && filepath.IsLocal(r) {
		return filepath.ToSlash(r), nil, nil
	}
	dst := filepath.Join(dir, filepath.Base(file))
	if _, err := os.Stat(dst); err == nil {
		return "", nil, fmt.Errorf("%s: cannot copy %s beside the scenario: a file of that name is there", dst, file)
	}
	in, err := os.Open(file)
	if err != nil {
		return "", nil, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", nil, err
	}
	if _, err := io.Copy(out, io.LimitReader(in, scenarios.MaxFileBytes+1)); err != nil {
		out.Close()
		return "", nil, err
	}
	if err := out.Close(); err != nil {
		return "", nil, err
	}
	return filepath.Base(file), []string{file + " to " + dst}, nil
}

func findNode(objs []scenarios.Object, name string) (*v1.Node, []string) {
	var names []string
	for _, o := range objs {
		if n, ok := o.Obj.(*v1.Node); ok {
			if n.Name == name {
				return n, nil
			}
			names = append(names, n.Name)
		}
	}
	slices.Sort(names)
	return nil, names
}

var versionRE = regexp.MustCompile(`^v?(\d+)\.(\d+)\.(\d+)`)

// nodeVersion is the node's kube-proxy version as the API shows it: the
// deprecated kubeProxyVersion if set, else the kubelet's, without a
// distribution's suffix (v1.29.3-eks-ae9a62a is v1.29.3).
func nodeVersion(n *v1.Node) string {
	for _, v := range []string{n.Status.NodeInfo.KubeProxyVersion, n.Status.NodeInfo.KubeletVersion} {
		if m := versionRE.FindStringSubmatch(v); m != nil {
			return fmt.Sprintf("v%s.%s.%s", m[1], m[2], m[3])
		}
	}
	return "v1.34.0"
}

// quote writes a string as a YAML scalar that reads back as itself.
func quote(s string) string {
	if s != "" && !strings.ContainsAny(s, ":#{}[],&*!|>'\"%@`") && strings.TrimSpace(s) == s && !scenarios.PlainNonString([]byte(s)) {
		return s
	}
	return fmt.Sprintf("%q", s)
}

// skeleton is the scenario Import writes.
func skeleton(o ImportOptions, s *scenarios.Scenario, m scenarios.Mode, node *v1.Node, cluster, config string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	version := nodeVersion(node)
	w("# Written by proxysim import from %s and %s for node %s.\n", filepath.Base(o.Cluster), filepath.Base(o.Config), o.Node)
	w("# The proxy's settings come from %s; a setting given here wins over it.\n", config)
	w("name: %s\n", quote(o.Node))
	w("description: |\n")
	w("  kube-proxy (mode %s) on node %s, replaying the cluster as dumped in\n", s.Proxy.Mode, o.Node)
	w("  %s. Add steps to the timeline to tell the story being chased.\n", cluster)
	w("proxy:\n")
	w("  version: %s  # the node's kubelet version\n", version)
	w("  config: %s\n", quote(config))
	w("  nodeName: %s\n", quote(node.Name))
	if z := node.Labels[v1.LabelTopologyZone]; z != "" {
		w("  zone: %s\n", quote(z))
	}
	var ips []string
	for _, a := range node.Status.Addresses {
		if a.Type == v1.NodeInternalIP || a.Type == v1.NodeExternalIP {
			ips = append(ips, quote(a.Address))
		}
	}
	if len(ips) > 0 && m != nil && slices.Contains(scenarios.SettingsKeys(m), "nodeIPs") {
		w("  nodeIPs: [%s]  # the node's InternalIP and ExternalIP addresses\n", strings.Join(ips, ", "))
	}
	w("objects:\n  - file: %s\n", quote(cluster))
	w("timeline:\n")
	w("  - at: 0s\n")
	w("    note: the dataplane after the initial sync, filled in by proxysim import\n")
	if k, ok := m.(SnapshotKeyer); ok {
		w("    expect:\n      %s: |\n", k.SnapshotKey())
	} else {
		w("    expect: {syncs: {count: 1}}\n")
	}
	if ex := exampleStep(s.Initial); ex != "" {
		w("  # An example step: take one endpoint out of service and see when the\n")
		w("  # proxy syncs.\n")
		w("%s", ex)
	}
	return b.String()
}

// exampleStep is a commented step on one endpoint of the dump.
func exampleStep(objs []scenarios.Object) string {
	for _, o := range objs {
		sl, ok := o.Obj.(*discovery.EndpointSlice)
		// The API server's own slice and kube-system's are poor examples.
		if !ok || sl.Namespace == "kube-system" || sl.Name == "kubernetes" || len(sl.Endpoints) == 0 || len(sl.Endpoints[0].Addresses) == 0 {
			continue
		}
		return fmt.Sprintf("  # - at: 5s\n  #   patch: {kind: EndpointSlice, namespace: %s, name: %s, endpoint: %s, conditions: {ready: false}}\n  # - at: 10s\n  #   expect: {syncs: {count: 2}}\n",
			sl.Namespace, sl.Name, sl.Endpoints[0].Addresses[0])
	}
	return ""
}
