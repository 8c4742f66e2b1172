// Package kubeproxyconfig checks proxysim's reading of kube-proxy
// configuration files against the real tools' code, at test time: kubeadm
// v1.36.3 renders the kube-proxy ConfigMap (as `kubeadm init` creates it),
// kube-proxy v1.36.3's own command decodes, defaults and validates the
// configuration in it (`kube-proxy --config FILE --write-config-to OUT`),
// and proxysim, built as users build it, imports and replays it. Nothing
// here is a file someone wrote for proxysim: the inputs are kubeadm
// configurations (and edits of them: fields unknown, misspelled or given
// twice, which kube-proxy reads leniently, and values it refuses), the
// outputs are the tools'.
//
// It is its own package so that kubeadm's dependencies stay out of the
// proxier comparisons' test binary.
package kubeproxyconfig

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	clientsetscheme "k8s.io/client-go/kubernetes/scheme"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeproxyapp "k8s.io/kubernetes/cmd/kube-proxy/app"
	kubeadmproxy "k8s.io/kubernetes/cmd/kubeadm/app/phases/addons/proxy"
	kubeadmconfig "k8s.io/kubernetes/cmd/kubeadm/app/util/config"
	proxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	proxyconfigscheme "k8s.io/kubernetes/pkg/proxy/apis/config/scheme"

	"github.com/proxysim/proxysim/e2e/transcript"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/iptablesmode"
	"github.com/proxysim/proxysim/scenarios/ipvsmode"
	"github.com/proxysim/proxysim/scenarios/nftablesmode"
)

// TestMain keeps kube-proxy's and kubeadm's logging out of the test output,
// and lets kube-proxy's command apply its (unchanged) logging configuration
// once per run, as each run is a fresh kube-proxy process.
func TestMain(m *testing.M) {
	transcript.SilenceKlog()
	logsapi.ReapplyHandling = logsapi.ReapplyHandlingIgnoreUnchanged
	flag.Parse()
	os.Exit(m.Run())
}

// repoRoot is proxysim's main module.
const repoRoot = "../../.."

// The cluster kubeadm initialises: the control plane and pod subnet of
// scenarios/testdata/byoc/kubeadm/cluster.yaml, the dump imported with
// each ConfigMap (its nodes are cp-1 at 192.168.56.10 and worker-1).
const kubeadmInit = `apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: 192.168.56.10
  bindPort: 6443
nodeRegistration:
  name: cp-1
  criSocket: unix:///var/run/containerd/containerd.sock
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.36.3
networking:
  podSubnet: 10.244.0.0/16
  serviceSubnet: 10.96.0.0/12
`

// variants are the KubeProxyConfiguration documents given to kubeadm
// beside its own configuration, as `kubeadm init --config` takes them: none
// (kubeadm's default), and the changes the guides make.
var variants = []struct {
	name, doc, mode string
}{
	{"default", "", "iptables"},
	{"ipvs-strictarp", `mode: ipvs
ipvs:
  scheduler: wrr
  strictARP: true
  tcpTimeout: 900s
  tcpFinTimeout: 30s
  udpTimeout: 10s
  minSyncPeriod: 2s
`, "ipvs"},
	{"ipvs-default", "mode: ipvs\n", "ipvs"},
	{"nftables", `mode: nftables
nftables:
  minSyncPeriod: 3s
  syncPeriod: 1m
configSyncPeriod: 30m
`, "nftables"},
	{"iptables-tuned", `mode: iptables
iptables:
  masqueradeAll: true
  minSyncPeriod: 10s
  syncPeriod: 1m
  masqueradeBit: 16
hostnameOverride: worker-1
`, "iptables"},
}

// kubeadmConfigMap runs kubeadm's own code: the configuration read and
// defaulted as `kubeadm init --config` reads it
// (cmd/kubeadm/app/util/config BytesToInitConfiguration), then the
// kube-proxy addon phase (cmd/kubeadm/app/phases/addons/proxy
// EnsureProxyAddon) against a fake API server; the ConfigMap it created is
// printed as `kubectl -n kube-system get configmap kube-proxy -o yaml`
// prints it (kubectl's YAML printer).
func kubeadmConfigMap(t *testing.T, kubeProxyDoc string) []byte {
	t.Helper()
	docs := kubeadmInit
	if kubeProxyDoc != "" {
		docs += "---\napiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n" + kubeProxyDoc
	}
	cfg, err := kubeadmconfig.BytesToInitConfiguration([]byte(docs), true)
	if err != nil {
		t.Fatalf("kubeadm: %v", err)
	}
	client := clientsetfake.NewClientset()
	if err := kubeadmproxy.EnsureProxyAddon(&cfg.ClusterConfiguration, &cfg.LocalAPIEndpoint, client, io.Discard, false); err != nil {
		t.Fatalf("kubeadm's kube-proxy addon: %v", err)
	}
	cm, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(context.Background(), "kube-proxy", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("kubeadm created no kube-proxy ConfigMap: %v", err)
	}
	cm.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	var out bytes.Buffer
	if err := (&printers.YAMLPrinter{}).PrintObj(cm, &out); err != nil {
		t.Fatal(err)
	}
	// kubeadm signs the configuration it defaulted itself, not one it was
	// given (componentconfigs SignConfigMap, IsUserSupplied).
	signed := strings.Contains(out.String(), "kubeadm.kubernetes.io/component-config.hash")
	if !strings.Contains(out.String(), "config.conf: |") || signed != (kubeProxyDoc == "") {
		t.Fatalf("not the ConfigMap kubeadm writes (signed %v):\n%s", signed, out.String())
	}
	return out.Bytes()
}

// configConf is the configuration kubeadm put in the ConfigMap.
func configConf(t *testing.T, cmYAML []byte) []byte {
	t.Helper()
	obj, _, err := clientsetscheme.Codecs.UniversalDeserializer().Decode(cmYAML, nil, &v1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	return []byte(obj.(*v1.ConfigMap).Data["config.conf"])
}

// kubeProxyMu serialises kube-proxy's command: it sets process-wide state
// (feature gates, logging), as the one process it expects to be.
var kubeProxyMu sync.Mutex

// kubeProxyEffective runs kube-proxy v1.36.3's command on a configuration
// file, `kube-proxy --config FILE --write-config-to OUT`: it decodes the
// file (strictly, else leniently), applies the v1alpha1 defaults
// (pkg/proxy/apis/config/v1alpha1 SetDefaults_KubeProxyConfiguration) and
// the Linux ones (cmd/kube-proxy/app platformApplyDefaults), validates it
// (pkg/proxy/apis/config/validation), and writes the configuration it would
// run with. That file, decoded by kube-proxy's scheme, is the configuration
// its proxier is built from. An error is kube-proxy refusing the file.
func kubeProxyEffective(t *testing.T, conf []byte) (*proxyconfig.KubeProxyConfiguration, error) {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "config.conf"), filepath.Join(dir, "effective.yaml")
	if err := os.WriteFile(in, conf, 0o644); err != nil {
		t.Fatal(err)
	}
	kubeProxyMu.Lock()
	cmd := kubeproxyapp.NewProxyCommand()
	cmd.SetArgs([]string{"--config", in, "--write-config-to", out})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	kubeProxyMu.Unlock()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := proxyconfigscheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		t.Fatalf("kube-proxy's own output does not decode: %v\n%s", err, data)
	}
	return obj.(*proxyconfig.KubeProxyConfiguration), nil
}

var (
	cliOnce sync.Once
	cliPath string
	cliErr  error
)

// proxysimCLI builds proxysim's command from its own module, with the
// dependencies its users get (k8s.io/kube-proxy's types at the version of
// proxysim's go.mod, not this module's replacements).
func proxysimCLI(t *testing.T) string {
	t.Helper()
	cliOnce.Do(func() {
		dir, err := os.MkdirTemp("", "proxysim-cli")
		if err != nil {
			cliErr = err
			return
		}
		cliPath = filepath.Join(dir, "proxysim")
		cmd := exec.Command("go", "build", "-o", cliPath, "./cmd/proxysim")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			cliErr = fmt.Errorf("go build ./cmd/proxysim: %v\n%s", err, out)
		}
	})
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return cliPath
}

// proxysim runs the CLI and returns its exit code and output.
func proxysim(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(proxysimCLI(t), args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatal(err)
	return 0, "", ""
}

// The dump imported with each ConfigMap, and the node whose proxy runs.
const (
	dump = "../../../scenarios/testdata/byoc/kubeadm/cluster.yaml"
	node = "worker-1"
)

// Each ConfigMap kubeadm renders is imported by `proxysim import` with a
// cluster dump, and the scenario validates and replays green; the settings
// proxysim runs with are those kube-proxy's own command runs with: every
// field of the defaulted configuration (compared in kube-proxy's internal
// form, which holds what the proxier is built from), and each setting the
// scenario's proxy takes from it.
func TestKubeadmConfigMapsMatchKubeProxy(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			cm := kubeadmConfigMap(t, v.doc)
			dir := importDir(t, cm)
			importAndReplay(t, dir, v.mode)

			// What kube-proxy runs with.
			want, err := kubeProxyEffective(t, configConf(t, cm))
			if err != nil {
				t.Fatalf("kube-proxy refuses kubeadm's configuration: %v", err)
			}
			sameAsKubeProxy(t, dir, want)
			if testing.Verbose() {
				t.Logf("kubeadm's config.conf, mode %s: kube-proxy runs with syncPeriod %v, minSyncPeriod %v, configSyncPeriod %v; so does proxysim", want.Mode, want.SyncPeriod.Duration, want.MinSyncPeriod.Duration, want.ConfigSyncPeriod.Duration)
			}
		})
	}
}

// importDir is a folder holding a kube-proxy configuration file (as
// kube-proxy.yaml) and the cluster dump (as cluster.yaml).
func importDir(t *testing.T, config []byte) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kube-proxy.yaml"), config, 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// importAndReplay runs the three commands on importDir's files: import,
// which replays, then validate and replay of what it wrote; each must pass,
// in the mode given. It returns import's stderr (its warnings).
func importAndReplay(t *testing.T, dir, mode string) string {
	t.Helper()
	code, stdout, stderr := proxysim(t, dir, "import", "--cluster", "cluster.yaml", "--config", "kube-proxy.yaml", "--node", node, "-o", "scenario.yaml")
	if code != 0 {
		t.Fatalf("proxysim import: exit %d\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "mode "+mode+",") || !strings.Contains(stdout, "PASS") {
		t.Fatalf("proxysim import did not replay mode %s green:\n%s", mode, stdout)
	}
	for _, c := range [][]string{{"validate", "scenario.yaml"}, {"replay", "scenario.yaml"}} {
		if code, stdout, stderr := proxysim(t, dir, c...); code != 0 {
			t.Fatalf("proxysim %s: exit %d\n%s%s", c[0], code, stdout, stderr)
		}
	}
	return stderr
}

// sameAsKubeProxy loads the scenario import wrote and checks that proxysim
// runs with what kube-proxy runs with (want): every field of the defaulted
// configuration, and the settings mapped onto the scenario's proxy.
func sameAsKubeProxy(t *testing.T, dir string, want *proxyconfig.KubeProxyConfiguration) {
	t.Helper()
	// What proxysim runs with: the library, built here against
	// kubernetes v1.36.3's staging modules.
	s, err := scenarios.Load(filepath.Join(dir, "scenario.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var got proxyconfig.KubeProxyConfiguration
	if err := proxyconfigscheme.Scheme.Convert(&s.Proxy.KubeProxy.Config, &got, nil); err != nil {
		t.Fatal(err)
	}
	// Normalised: the logging options, which kube-proxy's command
	// applies (and so completes) before writing; proxysim neither
	// logs nor models them.
	got.Logging = want.Logging
	if !reflect.DeepEqual(&got, want) {
		t.Errorf("the defaulted configuration differs from kube-proxy's:\n%s", fieldDiff(&got, want))
	}
	checkMapped(t, s, want)
}

// checkMapped compares the scenario's proxy settings, as proxysim maps the
// file onto them, with kube-proxy's effective configuration: every setting
// proxysim models.
func checkMapped(t *testing.T, s *scenarios.Scenario, kp *proxyconfig.KubeProxyConfiguration) {
	t.Helper()
	p := s.Proxy
	type pair struct {
		name      string
		got, want any
	}
	dur := func(d *scenarios.Duration) any {
		if d == nil {
			return "unset"
		}
		return d.String()
	}
	kd := func(d metav1.Duration) any { return scenarios.Duration(d.Duration).String() }
	pairs := []pair{
		{"mode", p.Mode, string(kp.Mode)},
		{"syncPeriod", dur(p.SyncPeriod), kd(kp.SyncPeriod)},
		{"minSyncPeriod", dur(p.MinSyncPeriod), kd(kp.MinSyncPeriod)},
		{"configSyncPeriod", dur(p.ConfigSyncPeriod), kd(kp.ConfigSyncPeriod)},
	}
	if kp.HostnameOverride != "" {
		pairs = append(pairs, pair{"hostnameOverride", p.NodeName, kp.HostnameOverride})
	}
	clusterCIDR := ""
	if kp.DetectLocalMode == proxyconfig.LocalModeClusterCIDR && len(kp.DetectLocal.ClusterCIDRs) > 0 {
		clusterCIDR = kp.DetectLocal.ClusterCIDRs[0]
	}
	switch set := p.Settings.(type) {
	case *ipvsmode.Settings:
		// The IPVS proxier runs an empty scheduler as rr
		// (pkg/proxy/ipvs/proxier.go NewProxier, defaultScheduler).
		scheduler := kp.IPVS.Scheduler
		if scheduler == "" {
			scheduler = "rr"
		}
		pairs = append(pairs,
			pair{"ipvs.scheduler", set.Scheduler, scheduler},
			pair{"ipvs.strictARP", set.StrictARP, kp.IPVS.StrictARP},
			pair{"ipvs.tcpTimeout", set.IPVSTimeouts.TCP.String(), kd(kp.IPVS.TCPTimeout)},
			pair{"ipvs.tcpFinTimeout", set.IPVSTimeouts.TCPFin.String(), kd(kp.IPVS.TCPFinTimeout)},
			pair{"ipvs.udpTimeout", set.IPVSTimeouts.UDP.String(), kd(kp.IPVS.UDPTimeout)})
	case *iptablesmode.Settings:
		pairs = append(pairs,
			pair{"masqueradeAll", set.MasqueradeAll, kp.Linux.MasqueradeAll},
			pair{"clusterCIDR", set.ClusterCIDR, clusterCIDR})
	case *nftablesmode.Settings:
		npa := ""
		if reflect.DeepEqual(kp.NodePortAddresses, []string{proxyconfig.NodePortAddressesPrimary}) {
			npa = "primary"
		}
		pairs = append(pairs,
			pair{"masqueradeAll", set.MasqueradeAll, kp.Linux.MasqueradeAll},
			pair{"clusterCIDR", set.ClusterCIDR, clusterCIDR},
			pair{"nodePortAddresses", set.NodePortAddresses, npa})
	default:
		t.Fatalf("mode %s: settings %T", p.Mode, p.Settings)
	}
	for _, c := range pairs {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s: proxysim runs with %v, kube-proxy with %v", c.name, c.got, c.want)
		}
	}
	// A setting proxysim does not model is listed, never dropped.
	if bit := *kp.IPTables.MasqueradeBit; bit != 14 {
		found := false
		for _, w := range s.Warnings {
			found = found || (w.Path == "iptables.masqueradeBit" && strings.Contains(w.Msg, "not modelled"))
		}
		if !found {
			t.Errorf("iptables.masqueradeBit %d is not modelled, yet no warning names it: %v", bit, s.Warnings)
		}
	}
}

// fieldDiff lists the fields of two configurations that differ.
func fieldDiff(a, b *proxyconfig.KubeProxyConfiguration) string {
	var out []string
	var walk func(path string, x, y reflect.Value)
	walk = func(path string, x, y reflect.Value) {
		if x.Kind() == reflect.Struct {
			for i := 0; i < x.NumField(); i++ {
				walk(path+"."+x.Type().Field(i).Name, x.Field(i), y.Field(i))
			}
			return
		}
		if !reflect.DeepEqual(x.Interface(), y.Interface()) {
			out = append(out, fmt.Sprintf("  %s: proxysim %#v, kube-proxy %#v", path, deref(x), deref(y)))
		}
	}
	walk("KubeProxyConfiguration", reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem())
	return strings.Join(out, "\n")
}

func deref(v reflect.Value) any {
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		return v.Elem().Interface()
	}
	return v.Interface()
}

// invalid are edits of kubeadm's default configuration (one field of
// config.conf each, at path, given value) that kube-proxy's command
// refuses. upstream is the field kube-proxy's error names (its internal
// type's path, as pkg/proxy/apis/config/validation writes it, or its
// decoder's); field is the field proxysim names, in the file's own
// spelling. The two differ only in spelling: validation walks the internal
// type, whose fields have Go names, and where syncPeriod moved to the top
// and conntrack and oomScoreAdj under Linux.
var invalid = []struct {
	name, path, value, upstream, field string
}{
	{"masquerade-bit", "iptables.masqueradeBit", "32", "KubeProxyConfiguration.KubeProxyIPTablesConfiguration.MasqueradeBit", "iptables.masqueradeBit"},
	{"min-above-sync", "iptables.minSyncPeriod", "2m", "KubeProxyConfiguration.SyncPeriod", "iptables.syncPeriod"},
	{"mode", "mode", "userspace", "KubeProxyConfiguration.Mode.ProxyMode", "mode"},
	{"bind-address", "bindAddress", "0.0.0", "KubeProxyConfiguration.BindAddress", "bindAddress"},
	{"metrics-bind-address", "metricsBindAddress", "127.0.0.1:99999", "KubeProxyConfiguration.MetricsBindAddress", "metricsBindAddress"},
	{"oom-score-adj", "oomScoreAdj", "1001", "KubeProxyConfiguration.KubeProxyLinuxConfiguration.OOMScoreAdj", "oomScoreAdj"},
	{"conntrack-min", "conntrack.min", "-1", "KubeProxyConfiguration.KubeProxyLinuxConfiguration.KubeProxyConntrackConfiguration.Min", "conntrack.min"},
	{"cluster-cidr", "clusterCIDR", "10.244.0.0/33", "KubeProxyConfiguration.DetectLocalConfiguration.ClusterCIDRs", "clusterCIDR"},
	{"detect-local-mode", "detectLocalMode", "PodCIDR", "KubeProxyConfiguration.DetectLocalMode", "detectLocalMode"},
	{"bridge-interface", "detectLocalMode", "BridgeInterface", "KubeProxyConfiguration.DetectLocalConfiguration.InterfaceName", "detectLocal.bridgeInterface"},
	{"config-sync-period", "configSyncPeriod", "-1m", "KubeProxyConfiguration.ConfigSyncPeriod", "configSyncPeriod"},
	{"duration", "configSyncPeriod", "15", "configSyncPeriod", "configSyncPeriod"},
	{"node-port-addresses", "nodePortAddresses", "[primary, 10.0.0.0/8]", "KubeProxyConfiguration.NodePortAddresses[0]", "nodePortAddresses[1]"},
	// A keyword of kube-proxy v1.37's nodePortAddresses, which v1.36 (and
	// so proxysim) does not know.
	{"node-port-addresses-all", "nodePortAddresses", "[all]", "KubeProxyConfiguration.NodePortAddresses[0]", "nodePortAddresses[0]"},
}

// configLine finds a field of config.conf in a ConfigMap's text by its
// dotted path (an index is dropped): its line number and value's offset.
func configLine(t *testing.T, text, path string) (line int, start, end int) {
	t.Helper()
	path, _, _ = strings.Cut(path, "[")
	lines := strings.SplitAfter(text, "\n")
	indent, i, off := "    ", 0, 0
	// The configuration starts after config.conf's own line.
	for ; i < len(lines) && !strings.HasPrefix(lines[i], "  config.conf: |"); i++ {
		off += len(lines[i])
	}
	for _, seg := range strings.Split(path, ".") {
		for {
			off += len(lines[i])
			i++
			if i >= len(lines) || (strings.TrimSpace(lines[i]) != "" && !strings.HasPrefix(lines[i], indent)) {
				t.Fatalf("no %s in kubeadm's config.conf:\n%s", path, text)
			}
			if strings.HasPrefix(lines[i], indent+seg+":") {
				break
			}
		}
		indent += "  "
	}
	keyEnd := off + strings.Index(lines[i], ":") + 1
	return i + 1, keyEnd, off + len(strings.TrimRight(lines[i], "\n"))
}

// Each edit of kubeadm's configuration that kube-proxy v1.36.3 refuses,
// proxysim refuses too: exit 2, naming the file, the line of the field and
// the field. The field kube-proxy names is pinned beside proxysim's, so a
// change in either shows.
func TestConfigsKubeProxyRejects(t *testing.T) {
	cm := string(kubeadmConfigMap(t, ""))
	for _, c := range invalid {
		t.Run(c.name, func(t *testing.T) {
			_, start, end := configLine(t, cm, c.path)
			edited := cm[:start] + " " + c.value + cm[end:]
			line, _, _ := configLine(t, edited, c.field)

			_, err := kubeProxyEffective(t, configConf(t, []byte(edited)))
			if err == nil {
				t.Fatalf("kube-proxy v1.36.3 accepts %s: %s", c.path, c.value)
			}
			if !strings.Contains(err.Error(), c.upstream) {
				t.Fatalf("kube-proxy's error does not name %s:\n%v", c.upstream, err)
			}

			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "kube-proxy.yaml"), []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
			scenario := "name: edited\nproxy:\n  version: v1.36.0\n  config: kube-proxy.yaml\n  nodeIPs: [192.168.56.11]\ntimeline:\n  - at: 0s\n    note: nothing\n"
			if err := os.WriteFile(filepath.Join(dir, "scenario.yaml"), []byte(scenario), 0o644); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := proxysim(t, dir, "validate", "scenario.yaml")
			if code != 2 {
				t.Fatalf("proxysim validate: exit %d, want 2\n%s%s", code, stdout, stderr)
			}
			at := regexp.MustCompile(`(?m)^kube-proxy\.yaml:` + fmt.Sprint(line) + `:\d+: ` + regexp.QuoteMeta(c.field) + `: `)
			if !at.MatchString(stderr) {
				t.Fatalf("proxysim does not name kube-proxy.yaml:%d and %s:\n%s", line, c.field, stderr)
			}
			t.Logf("kube-proxy: %s; proxysim: %s", c.upstream, strings.TrimSpace(at.FindString(stderr)))
		})
	}
}

// lenientEdits are edits of the ConfigMap kubeadm writes (for the variant
// named by base) or, where config gives one, a file of its own, which
// kube-proxy v1.36.3's strict decoding refuses only for strictness, an
// unknown or a duplicated field, so that kube-proxy decodes them again
// leniently and runs (cmd/kube-proxy/app/options.go, loadConfig); or,
// where refuse names a field, which it then refuses all the same.
// warnings are the fields proxysim warns of, each at its last line as a
// key in the file, with a text the warning holds.
var lenientEdits = []struct {
	name, base string
	edit       func(conf string) string // edits config.conf's text, indented as in the ConfigMap
	config     string                   // a whole file instead of kubeadm's ConfigMap
	mode       string
	warnings   [][2]string // field, text
	refuse     string      // the field proxysim refuses, when kube-proxy refuses
}{
	// A field v1alpha1 dropped, as older EKS configurations still carry.
	{name: "unknown-field", edit: before("    mode:", "    udpIdleTimeout: 250ms\n"), mode: "iptables",
		warnings: [][2]string{{"udpIdleTimeout", `unknown field "udpIdleTimeout"`}}},
	// Misspelled: kube-proxy runs with the default, rr, not wrr.
	{name: "misspelled-scheduler", base: "ipvs-strictarp", edit: replace("      scheduler: wrr\n", "      schedular: wrr\n"), mode: "ipvs",
		warnings: [][2]string{{"ipvs.schedular", `did you mean "scheduler"?`}}},
	// A field name's case matters: strictArp is not strictARP.
	{name: "miscased-strict-arp", base: "ipvs-strictarp", edit: replace("      strictARP: true\n", "      strictArp: true\n"), mode: "ipvs",
		warnings: [][2]string{{"ipvs.strictArp", `did you mean "strictARP"?`}}},
	// syncPeriod at the top, where the internal type (and v1alpha2) has it.
	{name: "sync-period-at-top", edit: before("    mode:", "    syncPeriod: 5s\n"), mode: "iptables",
		warnings: [][2]string{{"syncPeriod", `did you mean "iptables.syncPeriod", "ipvs.syncPeriod" or "nftables.syncPeriod"?`}}},
	// Duplicated: the last value wins, ...
	{name: "mode-twice-last-ipvs", edit: after("    mode: \"\"\n", "    mode: ipvs\n"), mode: "ipvs",
		warnings: [][2]string{{"mode", `field "mode" given twice`}}},
	// ... whichever it is, ...
	{name: "mode-twice-last-blank", edit: before("    mode:", "    mode: ipvs\n"), mode: "iptables",
		warnings: [][2]string{{"mode", `field "mode" given twice`}}},
	// ... and a YAML section given twice is the last one, whole: the
	// first's scheduler, strictARP and timeouts are dropped.
	{name: "ipvs-section-twice", base: "ipvs-strictarp", edit: before("    kind:", "    ipvs:\n      minSyncPeriod: 7s\n"), mode: "ipvs",
		warnings: [][2]string{{"ipvs", `field "ipvs" given twice`}}},
	// A JSON file's duplicate is decoded over the first: objects merge.
	{name: "json-section-twice", mode: "ipvs",
		config:   "{\"apiVersion\": \"kubeproxy.config.k8s.io/v1alpha1\", \"kind\": \"KubeProxyConfiguration\",\n \"mode\": \"ipvs\",\n \"ipvs\": {\"scheduler\": \"wrr\", \"tcpTimeout\": \"900s\"},\n \"ipvs\": {\"strictARP\": true, \"scheduler\": \"sh\"},\n \"bogus\": 1}\n",
		warnings: [][2]string{{"ipvs", `given twice`}, {"bogus", `unknown field "bogus"`}}},

	// Refused all the same: a duplicate whose last value is bad, ...
	{name: "mode-twice-last-bad", edit: after("    mode: \"\"\n", "    mode: userspace\n"), refuse: "mode"},
	// ... a bad value beside an unknown field, ...
	{name: "unknown-field-and-bad-value", edit: replace("      masqueradeBit: null\n      minSyncPeriod: 0s\n      syncPeriod: 0s\n    ipvs:", "      masqueradeBits: 3\n      masqueradeBit: 32\n      minSyncPeriod: 0s\n      syncPeriod: 0s\n    ipvs:"), refuse: "iptables.masqueradeBit"},
	// ... a wrong type, which strict and lenient decoding both refuse, ...
	{name: "wrong-type", edit: replace("      strictARP: false\n", "      strictARP: \"yes\"\n"), refuse: "ipvs.strictARP"},
	// ... and a file that starts as JSON but is YAML's flow style: kube-proxy
	// reads it as JSON.
	{name: "flow-not-json", config: "{apiVersion: kubeproxy.config.k8s.io/v1alpha1, kind: KubeProxyConfiguration}\n", refuse: "(configuration)"},
}

func replace(old, new string) func(string) string {
	return func(conf string) string {
		if strings.Count(conf, old) != 1 {
			panic(fmt.Sprintf("%q is not once in kubeadm's config.conf", old))
		}
		return strings.Replace(conf, old, new, 1)
	}
}

// before inserts text before the line starting with prefix; after, after
// the line.
func before(prefix, text string) func(string) string {
	return func(conf string) string {
		i := strings.Index(conf, "\n"+prefix)
		if i < 0 {
			panic(fmt.Sprintf("no %q in kubeadm's config.conf", prefix))
		}
		return conf[:i+1] + text + conf[i+1:]
	}
}

func after(line, text string) func(string) string {
	return replace(line, line+text)
}

// keyAt is the line and column of a field's key in a file: in kubeadm's
// ConfigMap, the last key of that name in its parent's block (config.conf
// is indented by four, each level by two more); in a JSON file, the last
// "name": (the cases' fields are at its top level).
func keyAt(t *testing.T, file, field string, json bool) (line, col int) {
	t.Helper()
	lines := strings.Split(file, "\n")
	if json {
		for i, l := range lines {
			if c := strings.LastIndex(l, `"`+field+`":`); c >= 0 {
				line, col = i+1, c+1
			}
		}
	} else {
		start, end := 0, len(lines)
		for d, seg := range strings.Split(field, ".") {
			indent := strings.Repeat(" ", 4+2*d)
			found := -1
			for i := start; i < end; i++ {
				if strings.HasPrefix(lines[i], indent+seg+":") {
					found = i
				}
			}
			if found < 0 {
				line = 0
				break
			}
			line, col = found+1, len(indent)+1
			// The block under it: the lines indented further.
			start, end = found+1, found+1
			for end < len(lines) && strings.HasPrefix(lines[end], indent+" ") {
				end++
			}
		}
	}
	if line == 0 {
		t.Fatalf("no key %s in\n%s", field, file)
	}
	return line, col
}

// What kube-proxy v1.36.3 runs with after reading a configuration
// leniently, proxysim runs with, warning at each field kube-proxy passed
// over, in the file's own lines; --strict refuses the file there. What
// kube-proxy refuses all the same, proxysim refuses: exit 2 at the field.
func TestLenientConfigsMatchKubeProxy(t *testing.T) {
	bases := map[string]string{}
	for _, v := range variants {
		bases[v.name] = v.doc
	}
	for _, c := range lenientEdits {
		t.Run(c.name, func(t *testing.T) {
			file, conf := []byte(c.config), []byte(c.config)
			if c.config == "" {
				base := c.base
				if base == "" {
					base = "default"
				}
				cm := string(kubeadmConfigMap(t, bases[base]))
				start := strings.Index(cm, "  config.conf: |") + len("  config.conf: |-\n")
				end := strings.Index(cm, "  kubeconfig.conf:")
				file = []byte(cm[:start] + c.edit(cm[start:end]) + cm[end:])
				conf = configConf(t, file)
			}

			// kube-proxy's own reading: strict decoding fails (only for
			// strictness, when kube-proxy goes on), then the command's.
			_, _, strictErr := proxyconfigscheme.Codecs.UniversalDecoder().Decode(conf, nil, nil)
			want, err := kubeProxyEffective(t, conf)
			dir := importDir(t, file)
			if c.refuse != "" {
				if err == nil {
					t.Fatalf("kube-proxy v1.36.3 runs with it")
				}
				scenario := "name: edited\nproxy:\n  version: v1.36.0\n  config: kube-proxy.yaml\n  nodeIPs: [192.168.56.11]\ntimeline:\n  - at: 0s\n    note: nothing\n"
				if err := os.WriteFile(filepath.Join(dir, "scenario.yaml"), []byte(scenario), 0o644); err != nil {
					t.Fatal(err)
				}
				code, stdout, stderr := proxysim(t, dir, "validate", "scenario.yaml")
				if code != 2 {
					t.Fatalf("kube-proxy refuses it (%v); proxysim validate: exit %d, want 2\n%s%s", err, code, stdout, stderr)
				}
				line := `\d+`
				if c.refuse != "(configuration)" {
					l, _ := keyAt(t, string(file), c.refuse, c.config != "")
					line = fmt.Sprint(l)
				}
				at := regexp.MustCompile(`(?m)^kube-proxy\.yaml:` + line + `:\d+: ` + regexp.QuoteMeta(c.refuse) + `: `)
				if !at.MatchString(stderr) {
					t.Fatalf("proxysim does not name kube-proxy.yaml:%s and %s:\n%s", line, c.refuse, stderr)
				}
				t.Logf("kube-proxy: %v; proxysim: %s", err, strings.TrimSpace(at.FindString(stderr)))
				return
			}
			if !runtime.IsStrictDecodingError(strictErr) {
				t.Fatalf("not a case of strictness: kube-proxy's strict decoding says %v", strictErr)
			}
			if err != nil {
				t.Fatalf("kube-proxy v1.36.3 refuses it: %v", err)
			}
			stderr := importAndReplay(t, dir, c.mode)
			sameAsKubeProxy(t, dir, want)
			for _, w := range c.warnings {
				line, col := keyAt(t, string(file), w[0], c.config != "")
				prefix := fmt.Sprintf("warning: kube-proxy.yaml:%d:%d: %s: ", line, col, w[0])
				found := false
				for _, l := range strings.Split(stderr, "\n") {
					found = found || (strings.HasPrefix(l, prefix) && strings.Contains(l, w[1]))
				}
				if !found {
					t.Errorf("no warning %s...%s in:\n%s", prefix, w[1], stderr)
				}
			}
			code, stdout, serr := proxysim(t, dir, "validate", "--strict", "scenario.yaml")
			line, col := keyAt(t, string(file), c.warnings[0][0], c.config != "")
			if first := fmt.Sprintf("kube-proxy.yaml:%d:%d: %s: ", line, col, c.warnings[0][0]); code != 2 || !strings.HasPrefix(serr, first) {
				t.Errorf("proxysim validate --strict: exit %d, want 2 at %s\n%s%s", code, first, stdout, serr)
			}
			t.Logf("kube-proxy: %s; proxysim: mode %s, %s", strings.Join(strings.Fields(strictErr.Error()), " "), want.Mode, strings.SplitN(stderr, "\n", 2)[0])
		})
	}
}
