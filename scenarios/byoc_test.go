package scenarios_test

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/iptablesmode"
	"github.com/proxysim/proxysim/scenarios/ipvsmode"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim"
)

// A bad KubeProxyConfiguration is refused at the file, line, column and
// field of the problem: each file under testdata/byoc/invalid says where,
// as "# want: exit=2 at=FILE:LINE:COL FIELD".
func TestInvalidKubeProxyConfigurations(t *testing.T) {
	files, _ := filepath.Glob("testdata/byoc/invalid/*.yaml")
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".conf.yaml") {
			continue
		}
		n++
		t.Run(filepath.Base(f), func(t *testing.T) {
			fh, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(fh)
			sc.Scan()
			fh.Close()
			want, ok := strings.CutPrefix(sc.Text(), "# want: exit=2 at=")
			if !ok {
				t.Fatalf("first line must be '# want: exit=2 at=FILE:L:C FIELD'")
			}
			at, field, _ := strings.Cut(want, " ")
			_, err = scenarios.Load(f)
			var ps scenarios.Problems
			if !errors.As(err, &ps) {
				t.Fatalf("got %v, want problems", err)
			}
			prefix := filepath.Join(filepath.Dir(f), at) + ": " + field + ": "
			if got := ps[0].Error(); !strings.HasPrefix(got, prefix) {
				t.Fatalf("first problem:\n got  %s\n want %s...", got, prefix)
			}
		})
	}
	if n < 10 {
		t.Fatalf("%d invalid configurations; want at least 10", n)
	}
}

// A configuration that fails strict decoding only for an unknown or a
// duplicated field is read as kube-proxy reads it, leniently: it loads,
// with a warning at the field's file, line and column (and the known field
// it likely misspells); --strict refuses it there. Each file under
// testdata/byoc/lenient says so, as "# warn: FILE:LINE:COL: FIELD: TEXT"
// lines (the first is what --strict refuses) and the settings kube-proxy
// runs with are checked below.
func TestLenientKubeProxyConfigurations(t *testing.T) {
	// What each file runs with: the value of a misspelled field is
	// dropped; a YAML file's duplicate keeps the last value whole, a JSON
	// file's merges its objects.
	settings := map[string]func(t *testing.T, s *scenarios.Scenario){
		"03-kubeadm-misspelled-scheduler.yaml": func(t *testing.T, s *scenarios.Scenario) {
			set, _ := ipvsmode.SettingsOf(s)
			if s.Proxy.Mode != "ipvs" || set.Scheduler != "rr" || !set.StrictARP {
				t.Errorf("mode %s, scheduler %q, strictARP %v; want ipvs, rr (the misspelled wrr dropped), true", s.Proxy.Mode, set.Scheduler, set.StrictARP)
			}
		},
		"04-mode-given-twice.yaml": func(t *testing.T, s *scenarios.Scenario) {
			set, _ := ipvsmode.SettingsOf(s)
			if s.Proxy.Mode != "ipvs" || set.Scheduler != "rr" || !set.StrictARP {
				t.Errorf("mode %s, scheduler %q, strictARP %v; want ipvs, rr (the first ipvs section dropped), true", s.Proxy.Mode, set.Scheduler, set.StrictARP)
			}
		},
		"05-json-section-twice.yaml": func(t *testing.T, s *scenarios.Scenario) {
			set, _ := ipvsmode.SettingsOf(s)
			if s.Proxy.Mode != "ipvs" || set.Scheduler != "wrr" || !set.StrictARP || s.Proxy.SyncPeriod.D() != 30*time.Second {
				t.Errorf("mode %s, scheduler %q, strictARP %v, syncPeriod %v; want ipvs, wrr and true (merged), 30s", s.Proxy.Mode, set.Scheduler, set.StrictARP, s.Proxy.SyncPeriod)
			}
		},
	}
	files, _ := filepath.Glob("testdata/byoc/lenient/*.yaml")
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".conf.yaml") {
			continue
		}
		n++
		t.Run(filepath.Base(f), func(t *testing.T) {
			text, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var warns []string
			for _, line := range strings.Split(string(text), "\n") {
				if w, ok := strings.CutPrefix(line, "# warn: "); ok {
					warns = append(warns, filepath.Join(filepath.Dir(f), w))
				}
			}
			if len(warns) == 0 {
				t.Fatalf("want '# warn: FILE:L:C: FIELD: TEXT' lines")
			}
			s, err := scenarios.Load(f)
			if err != nil {
				t.Fatalf("kube-proxy runs with it, proxysim refuses it:\n%v", err)
			}
			for _, w := range warns {
				found := false
				for _, got := range s.Warnings {
					found = found || strings.HasPrefix(got.Error(), w)
				}
				if !found {
					t.Errorf("no warning\n  %s\nin\n  %v", w, s.Warnings)
				}
			}
			if check := settings[filepath.Base(f)]; check != nil {
				check(t, s)
			}
			// The same file refused by --strict, at the first field.
			_, err = scenarios.LoadWith(f, scenarios.LoadOptions{Strict: true})
			var ps scenarios.Problems
			if !errors.As(err, &ps) {
				t.Fatalf("--strict: got %v, want problems", err)
			}
			loc, rest, _ := strings.Cut(warns[0], " ")
			field, _, _ := strings.Cut(rest, ": ")
			if got := ps[0].Error(); !strings.HasPrefix(got, loc+" "+field+": ") || !strings.Contains(got, "refused by --strict") {
				t.Fatalf("--strict, first problem:\n got  %s\n want %s %s: ... refused by --strict ...", got, loc, field)
			}
		})
	}
	if n < 5 {
		t.Fatalf("%d lenient configurations; want at least 5", n)
	}
}

// A configuration refused after it decoded (by --strict, or for a value
// kube-proxy refuses) still gives the scenario its mode: the scenario's
// keys of that mode are not reported as unknown besides the file's problem.
func TestRefusedConfigKeepsItsMode(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"typo.yaml": minimalConfig + "mode: iptables\niptables: {minSyncPerod: 2s}\n",
		"bad.yaml":  minimalConfig + "mode: iptables\niptables: {masqueradeBit: 32}\n",
		"s.yaml":    "name: s\nproxy: {version: v1.34.0, config: typo.yaml, clusterCIDR: 10.0.0.0/8}\ntimeline: [{at: 1s, note: x}]\n",
		"t.yaml":    "name: t\nproxy: {version: v1.34.0, config: bad.yaml, clusterCIDR: 10.0.0.0/8}\ntimeline: [{at: 1s, note: x}]\n",
	})
	for file, want := range map[string]string{
		"s.yaml": "typo.yaml:4:12: iptables.minSyncPerod: unknown field \"minSyncPerod\"",
		"t.yaml": "bad.yaml:4:27: iptables.masqueradeBit: must be within [0, 31], got 32",
	} {
		_, err := scenarios.LoadWith(filepath.Join(dir, file), scenarios.LoadOptions{Strict: true})
		var ps scenarios.Problems
		if !errors.As(err, &ps) || len(ps) != 1 || !strings.HasPrefix(ps[0].Error(), filepath.Join(dir, want)) {
			t.Errorf("%s: got %v, want only %s", file, err, want)
		}
	}
	// Without --strict the misspelled field is a warning, and the
	// iptables mode runs with its default minSyncPeriod.
	s, err := scenarios.Load(filepath.Join(dir, "s.yaml"))
	if err != nil || s.Proxy.Mode != "iptables" || s.Proxy.MinSyncPeriod.D() != time.Second || len(s.Warnings) != 1 ||
		!strings.HasSuffix(s.Warnings[0].Msg, `did you mean "minSyncPeriod"?`) {
		t.Fatalf("%v: %+v", err, s)
	}
}

// writeFiles writes files into a fresh folder and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const minimalConfig = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"

// Unset settings take kube-proxy's defaults: mode iptables, the iptables
// section's 30s/1s, configSyncPeriod 15m; the IPVS section's minSyncPeriod
// has none (0s).
func TestKubeProxyConfigDefaults(t *testing.T) {
	for _, tc := range []struct {
		config, mode     string
		sync, min, cfgSP time.Duration
	}{
		{minimalConfig, "iptables", 30 * time.Second, time.Second, 15 * time.Minute},
		{minimalConfig + "mode: ipvs\n", "ipvs", 30 * time.Second, 0, 15 * time.Minute},
		{minimalConfig + "mode: ipvs\nipvs: {syncPeriod: 1m, minSyncPeriod: 10s}\nconfigSyncPeriod: 5m\n", "ipvs", time.Minute, 10 * time.Second, 5 * time.Minute},
		// kube-proxy treats 0s as unset: the iptables minSyncPeriod cannot be 0s from a file.
		{minimalConfig + "iptables: {minSyncPeriod: 0s}\n", "iptables", 30 * time.Second, time.Second, 15 * time.Minute},
	} {
		dir := writeFiles(t, map[string]string{"kp.yaml": tc.config,
			"s.yaml": "name: s\nproxy: {version: v1.34.0, config: kp.yaml}\ntimeline: [{at: 1s, note: x}]\n"})
		s, err := scenarios.Load(filepath.Join(dir, "s.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		p := s.Proxy
		if p.Mode != tc.mode || p.SyncPeriod.D() != tc.sync || p.MinSyncPeriod.D() != tc.min || p.ConfigSyncPeriod.D() != tc.cfgSP {
			t.Errorf("%q: mode %s, sync %v, min %v, configSync %v", tc.config, p.Mode, p.SyncPeriod, p.MinSyncPeriod, p.ConfigSyncPeriod)
		}
		if len(s.Warnings) != 0 {
			t.Errorf("%q: warnings for a configuration of defaults: %v", tc.config, s.Warnings)
		}
	}
}

// What the scenario gives wins over the file; what it does not give comes
// from the file, field by field.
func TestExplicitSettingsOverrideTheConfig(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"ipvs.yaml": minimalConfig + "mode: ipvs\nipvs:\n  scheduler: lc\n  strictARP: true\n  minSyncPeriod: 2s\n  tcpTimeout: 900s\n  tcpFinTimeout: 30s\nhostnameOverride: node-x\nnodePortAddresses: [192.168.0.0/16]\n",
		"s.yaml": `name: s
proxy:
  version: v1.34.0
  config: ipvs.yaml
  scheduler: wrr
  minSyncPeriod: 5s
  ipvsTimeouts: {tcp: 1h}
  nodeIPs: [192.168.1.5, 10.0.0.5]
timeline: [{at: 1s, note: x}]
`,
		"ipt.yaml": minimalConfig + "iptables: {minSyncPeriod: 10s, masqueradeAll: true}\nclusterCIDR: 10.244.0.0/16,fd00:10:244::/56\n",
		"t.yaml":   "name: t\nproxy: {version: v1.34.0, config: ipt.yaml, mode: nftables, scheduler: wrr}\ntimeline: [{at: 1s, note: x}]\n",
		"u.yaml":   "name: u\nproxy: {version: v1.34.0, config: ipt.yaml, masqueradeAll: false}\ntimeline: [{at: 1s, note: x}]\n",
	})
	s, err := scenarios.Load(filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err) // the file's scheduler lc is not modelled, but the scenario's wrr wins
	}
	set, _ := ipvsmode.SettingsOf(s)
	p := s.Proxy
	if set.Scheduler != "wrr" || !set.StrictARP || p.MinSyncPeriod.D() != 5*time.Second || p.SyncPeriod.D() != 30*time.Second ||
		set.IPVSTimeouts.TCP.D() != time.Hour || set.IPVSTimeouts.TCPFin.D() != 30*time.Second || p.NodeName != "node-x" ||
		strings.Join(set.NodeIPs, ",") != "192.168.1.5" {
		t.Fatalf("proxy %+v, settings %+v", p, set)
	}
	// proxy.mode wins over the file's mode; the IPVS mode's scheduler
	// key is then unknown in an nftables scenario.
	if _, err := scenarios.Load(filepath.Join(dir, "t.yaml")); err == nil || !strings.Contains(err.Error(), `proxy.scheduler: unknown field "scheduler"`) {
		t.Fatalf("got %v", err)
	}
	u, err := scenarios.Load(filepath.Join(dir, "u.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ipt, _ := u.Proxy.Settings.(*iptablesmode.Settings)
	if ipt.MasqueradeAll || ipt.ClusterCIDR != "10.244.0.0/16" || u.Proxy.MinSyncPeriod.D() != 10*time.Second {
		t.Fatalf("settings %+v, min %v", ipt, u.Proxy.MinSyncPeriod)
	}
	// The IPv6 half of the cluster CIDR is not modelled, and says so.
	if len(u.Warnings) != 1 || !strings.Contains(u.Warnings[0].Error(), "ipt.yaml:4:14: clusterCIDR: fd00:10:244::/56 is not modelled") {
		t.Fatalf("warnings %v", u.Warnings)
	}
}

// Every setting the file changes from kube-proxy's default and proxysim
// does not model is listed, at its line; none is dropped silently. (The
// IPVS mode models iptables.masqueradeAll: its proxier's rules read it.)
func TestUnmodelledSettingsAreListed(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"kp.yaml": minimalConfig + "mode: ipvs\nconntrack:\n  maxPerCore: 0\nipvs:\n  excludeCIDRs: [10.0.0.0/8]\nfeatureGates: {SomeGate: true}\niptables: {masqueradeAll: true}\n",
		"s.yaml":  "name: s\nproxy: {version: v1.34.0, config: kp.yaml}\ntimeline: [{at: 1s, note: x}]\n",
	})
	s, err := scenarios.Load(filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range s.Warnings {
		got = append(got, strings.TrimPrefix(w.Error(), filepath.Join(dir, "kp.yaml")+":"))
	}
	want := []string{
		`5:15: conntrack.maxPerCore: not modelled by proxysim (mode ipvs): 0 is ignored`,
		`8:26: featureGates.SomeGate: not modelled by proxysim (mode ipvs): true is ignored`,
		`7:17: ipvs.excludeCIDRs: not modelled by proxysim (mode ipvs): ["10.0.0.0/8"] is ignored`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// kubectl's List, several YAML documents and JSON values all load; a kind
// proxysim does not model is skipped with a note, or refused when strict.
func TestDumpShapesAndStrict(t *testing.T) {
	svc := func(name, ip string) string {
		return "apiVersion: v1\nkind: Service\nmetadata: {name: " + name + ", namespace: default, uid: u-" + name + ", resourceVersion: \"7\", creationTimestamp: \"2025-01-01T00:00:00Z\", managedFields: [{manager: kubectl, operation: Update, apiVersion: v1}]}\nspec: {clusterIP: " + ip + ", ports: [{port: 80}]}\nstatus: {loadBalancer: {}}\n"
	}
	indent := func(s, pad string) string {
		lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
		for i := range lines {
			if i == 0 {
				lines[i] = pad + "- " + lines[i]
			} else {
				lines[i] = pad + "  " + lines[i]
			}
		}
		return strings.Join(lines, "\n") + "\n"
	}
	deploy := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: default}\nspec: {}\n"
	dir := writeFiles(t, map[string]string{
		"list.yaml":  "apiVersion: v1\nitems:\n" + indent(svc("a", "10.96.0.1"), "") + indent(deploy, "") + "kind: List\nmetadata:\n  resourceVersion: \"\"\n",
		"list2.yaml": "apiVersion: v1\nkind: List\nitems:\n" + indent(svc("b", "10.96.0.2"), "  "),
		"docs.yaml":  svc("c", "10.96.0.3") + "---\n" + deploy + "---\n" + svc("d", "10.96.0.4"),
		// A dash on a line of its own: not what kubectl prints; read the general way.
		"list3.yaml":    "apiVersion: v1\nkind: List\nitems:\n-\n  " + strings.TrimPrefix(indent(svc("f", "10.96.0.6"), ""), "- ") + "- " + strings.ReplaceAll(strings.TrimSuffix(deploy, "\n"), "\n", "\n  ") + "\n",
		"values.json":   `{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "e"}, "spec": {"clusterIP": "10.96.0.5", "ports": [{"port": 80}]}}` + "\n" + `{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "e"}}, {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}]}` + "\n",
		"scenario.yaml": "name: s\nproxy: {version: v1.34.0}\nobjects:\n  - file: list.yaml\n  - file: list2.yaml\n  - file: docs.yaml\n  - file: values.json\n  - file: list3.yaml\ntimeline: [{at: 1s, expect: {syncs: {count: 1}}}]\n",
	})
	file := filepath.Join(dir, "scenario.yaml")
	s, err := scenarios.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range s.Initial {
		keys = append(keys, o.Key)
	}
	if strings.Join(keys, ",") != "Service default/a,Service default/b,Service default/c,Service default/d,Service default/e,Endpoints default/e,Service default/f" {
		t.Fatalf("objects %v", keys)
	}
	var notes []string
	for _, w := range s.Warnings {
		notes = append(notes, strings.TrimPrefix(w.Error(), dir+"/"))
	}
	want := []string{
		"list.yaml:8:3: (document 0).items[1]: skipped Deployment default/d (apps/v1): proxysim does not model this kind",
		"docs.yaml:7:1: (document 1): skipped Deployment default/d (apps/v1): proxysim does not model this kind",
		"values.json:2:118: (document 1).items[1]: skipped Widget w (example.com/v1): proxysim does not model this kind",
		"list3.yaml:10:3: (document 0).items[1]: skipped Deployment default/d (apps/v1): proxysim does not model this kind",
	}
	if strings.Join(notes, "\n") != strings.Join(want, "\n") {
		t.Fatalf("notes:\n%s\nwant:\n%s", strings.Join(notes, "\n"), strings.Join(want, "\n"))
	}
	res, err := replay.Replay(s, replay.Options{})
	if err != nil || !res.Passed() {
		t.Fatalf("%v %v", err, res.Failures)
	}
	_, err = scenarios.LoadWith(file, scenarios.LoadOptions{Strict: true})
	var ps scenarios.Problems
	if !errors.As(err, &ps) || len(ps) != 4 || !strings.HasPrefix(ps[0].Error(), filepath.Join(dir, "list.yaml")+":8:3: (document 0).items[1].kind: Deployment default/d (apps/v1) is of a kind proxysim does not model (--strict") {
		t.Fatalf("strict: %v", err)
	}
}

// A server field in the wrong place is still an error, as the API server's
// strict decoding makes it: a dump is not a licence for unknown fields.
func TestDumpUnknownFieldIsAnError(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"d.json":        "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [\n  {\"apiVersion\": \"v1\", \"kind\": \"Service\", \"metadata\": {\"name\": \"x\"},\n   \"spec\": {\"clusterIP\": \"10.96.0.9\", \"ports\": [{\"port\": 80}], \"bogus\": 1}}]}\n",
		"scenario.yaml": "name: s\nproxy: {version: v1.34.0}\nobjects: [{file: d.json}]\ntimeline: [{at: 1s, note: x}]\n",
	})
	_, err := scenarios.Load(filepath.Join(dir, "scenario.yaml"))
	if err == nil || !strings.Contains(err.Error(), "d.json:3:64: (document 0).items[0].spec.bogus: unknown field \"bogus\"") {
		t.Fatalf("got %v", err)
	}
}

// A dump loads every kind the world carries.
func TestDumpKindsAreTheWorlds(t *testing.T) {
	dir := writeFiles(t, map[string]string{"d.yaml": "", "s.yaml": "name: s\nproxy: {version: v1.34.0}\nobjects: [{file: d.yaml}]\ntimeline: [{at: 1s, note: x}]\n"})
	for _, k := range sim.Kinds() {
		gv := "v1"
		switch k {
		case "EndpointSlice":
			gv = "discovery.k8s.io/v1"
		case "Ingress", "IngressClass":
			gv = "networking.k8s.io/v1"
		}
		doc := "apiVersion: " + gv + "\nkind: " + k + "\nmetadata: {name: x}\n"
		if err := os.WriteFile(filepath.Join(dir, "d.yaml"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		// Loaded, or refused by the kind's own rules (a bare Service has
		// no cluster IP): never skipped.
		s, err := scenarios.Load(filepath.Join(dir, "s.yaml"))
		switch {
		case err != nil && strings.Contains(err.Error(), "does not model"):
			t.Errorf("%s: %v", k, err)
		case err == nil && (len(s.Initial) != 1 || len(s.Warnings) != 0):
			t.Errorf("%s: %d objects, warnings %v", k, len(s.Initial), s.Warnings)
		}
	}
}
