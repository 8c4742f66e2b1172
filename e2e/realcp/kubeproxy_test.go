package realcp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	vnetns "github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/proxysim/proxysim/netns"
)

// kubeProxyBinary is the kube-proxy to run: $KUBE_PROXY (a developer's own
// build), or v1.36.3's cmd/kube-proxy built from this module into the
// user's cache (go build relinks only when something changed).
func kubeProxyBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("KUBE_PROXY"); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(abs); err != nil || st.Mode()&0o111 == 0 {
			t.Fatalf("KUBE_PROXY=%s is not an executable file (%v)", p, err)
		}
		return abs
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(cache, "proxysim", "realcp", "kube-proxy")
	start := time.Now()
	cmd := exec.Command("go", "build", "-o", out, "k8s.io/kubernetes/cmd/kube-proxy")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build k8s.io/kubernetes/cmd/kube-proxy: %v\n%s", err, b)
	}
	t.Logf("kube-proxy v1.36.3 built (or found up to date) in %v: %s", time.Since(start).Round(time.Millisecond), out)
	return out
}

// proxyConfig is what kube-proxy is started with, from the scenario.
type proxyConfig struct {
	Mode                      string // iptables or nftables
	Backend                   netns.IPTablesBackend
	NodeName                  string
	NodeIP                    string
	ClusterCIDR               string
	MasqueradeAll             bool
	SyncPeriod, MinSyncPeriod time.Duration
	ConfigSyncPeriod          time.Duration
	// NodePortAddresses: nil = every local address, written as 0.0.0.0/0
	// (kube-proxy's nftables mode would otherwise default to primary,
	// cmd/kube-proxy/app/server_linux.go platformApplyDefaults).
	NodePortAddresses []string
	// CPUProbe: instead of the kernel's tables, read kube-proxy's CPU
	// times (its own and its waited-for children's, see cpuTimes) at each
	// sync's start and end line (the scale runs: a 20,000-Service listing
	// after every sync would cost more than the sync).
	CPUProbe bool
}

// metricsPort is kube-proxy's default, inside its own namespace.
const metricsPort = 10249

// apiPort is where the relay listens on the namespace's loopback.
const apiPort = 6443

// configYAML is the KubeProxyConfiguration. conntrack.maxPerCore 0: a
// child namespace's nf_conntrack_max is read-only, and kube-proxy aborts
// start-up when it cannot set it (FACTS §7.4).
func (c proxyConfig) configYAML(kubeconfig string) string {
	npa := c.NodePortAddresses
	if len(npa) == 0 {
		npa = []string{"0.0.0.0/0"}
	}
	section := fmt.Sprintf("  syncPeriod: %s\n  minSyncPeriod: %s\n  masqueradeAll: %v\n", c.SyncPeriod, c.MinSyncPeriod, c.MasqueradeAll)
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
mode: %s
clusterCIDR: %q
metricsBindAddress: 127.0.0.1:%d
healthzBindAddress: 127.0.0.1:10256
configSyncPeriod: %s
nodePortAddresses: [%s]
conntrack:
  maxPerCore: 0
iptables:
%snftables:
%s`, kubeconfig, c.NodeName, c.Mode, c.ClusterCIDR, metricsPort, c.ConfigSyncPeriod, strings.Join(npa, ", "), section, section)
}

// kubeProxy is one kube-proxy process in its namespace.
type kubeProxy struct {
	dir    string // the run's folder
	ns     *netns.Namespace
	cfg    proxyConfig
	cmd    *exec.Cmd
	waited chan struct{}
	exitMu sync.Mutex
	exit   error
	log    *syncLog
	relay  net.Listener
	// binary, args, env and out start each process (a restart starts
	// another in the same namespace, writing to the same log).
	binary string
	args   []string
	env    []string
	out    io.Writer
}

// startKubeProxy makes kube-proxy's namespace, its Node, its files, and
// starts it. The process dies with this one (Pdeathsig); the namespace is
// removed by stop, or by the next run's netns.Sweep.
func startKubeProxy(t *testing.T, cp *controlPlane, dir, binary string, cfg proxyConfig) *kubeProxy {
	t.Helper()
	ctx := context.Background()
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: cfg.NodeName},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: cfg.NodeIP},
			{Type: v1.NodeHostName, Address: cfg.NodeName},
		}},
	}
	// kube-proxy waits for its Node's addresses (up to 30s) and exits if
	// they change later: the Node is made once, before it starts (one
	// control plane may serve kube-proxies one after the other: the scale
	// runs).
	if _, err := cp.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create Node %s: %v", cfg.NodeName, err)
	}
	ns, err := netns.Create("realcp")
	if err != nil {
		t.Fatal(err)
	}
	kp := &kubeProxy{ns: ns, cfg: cfg, dir: dir, waited: make(chan struct{})}
	t.Cleanup(func() {
		kp.stop()
		if err := ns.Close(); err != nil {
			t.Errorf("remove namespace %s: %v", ns.Name, err)
		}
	})
	// One family: kube-proxy runs dual-stack when the namespace has IPv6
	// (cmd/kube-proxy/app/server_linux.go platformCheckSupported).
	for _, s := range []string{"net/ipv6/conf/all/disable_ipv6", "net/ipv6/conf/default/disable_ipv6"} {
		if err := ns.Sysctl().Set(s, 1); err != nil {
			t.Fatalf("%s in %s: %v", s, ns.Name, err)
		}
	}
	if err := ns.AddrAdd("lo", cfg.NodeIP+"/32"); err != nil {
		t.Fatalf("node IP on lo: %v", err)
	}
	if err := kp.startRelay(cp.port); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(kubeconfigYAML(cp, apiPort)), 0o600); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "kube-proxy.yaml")
	if err := os.WriteFile(config, []byte(cfg.configYAML(kubeconfig)), 0o600); err != nil {
		t.Fatal(err)
	}
	bin, err := toolDir(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "kube-proxy.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() })
	snap := snapshotter(ns, cfg)
	if cfg.CPUProbe {
		snap = kp.cpuTimes
	}
	kp.log = newSyncLog(snap)
	if cfg.CPUProbe {
		kp.log.atStart = kp.cpuTimes
	}
	kp.binary, kp.out = binary, logFile
	kp.args = []string{"--config=" + config, "--hostname-override=" + cfg.NodeName, "-v=2"}
	kp.env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "XTABLES_LOCKFILE=/tmp/proxysim-xtables.lock")
	if err := kp.launch(); err != nil {
		t.Fatalf("start kube-proxy: %v", err)
	}
	return kp
}

// launch starts a kube-proxy process in the namespace, its output read
// into the sync log.
func (kp *kubeProxy) launch() error {
	pr, pw := io.Pipe()
	kp.cmd = exec.Command(kp.binary, kp.args...)
	kp.cmd.Env = kp.env
	kp.cmd.Stdout = io.MultiWriter(kp.out, pw)
	kp.cmd.Stderr = kp.cmd.Stdout
	kp.waited = make(chan struct{})
	waited := kp.waited
	go kp.log.read(pr)
	if err := kp.startInNamespace(); err != nil {
		pw.Close()
		return err
	}
	go func() {
		<-waited
		pw.Close()
	}()
	return nil
}

// restart ends the kube-proxy process (stopProcess) and starts another in
// the same namespace: the kernel's tables stay, as when a node's
// kube-proxy pod restarts.
func (kp *kubeProxy) restart() error {
	kp.stopProcess()
	return kp.launch()
}

// startInNamespace starts kube-proxy from a thread inside the namespace,
// so it starts there, that dies with this process (Pdeathsig: the kernel
// SIGKILLs it when the forking thread ends, and a thread locked until the
// process is reaped cannot end before). The thread is never returned to
// Go: it ends with its goroutine.
func (kp *kubeProxy) startInNamespace() error {
	kp.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	cmd, waited := kp.cmd, kp.waited
	go func() {
		runtime.LockOSThread() // never unlocked: the thread leaves the host's namespace
		if err := vnetns.Set(kp.ns.Handle()); err != nil {
			started <- fmt.Errorf("enter %s: %w", kp.ns.Name, err)
			return
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		err := cmd.Wait()
		kp.exitMu.Lock()
		kp.exit = err
		kp.exitMu.Unlock()
		close(waited)
	}()
	return <-started
}

// stop ends kube-proxy (stopProcess) and the relay.
func (kp *kubeProxy) stop() {
	if kp.relay != nil {
		kp.relay.Close()
	}
	kp.stopProcess()
}

// stopProcess ends the kube-proxy process: SIGTERM, as the kubelet stops
// its pod, then SIGKILL after 5s.
func (kp *kubeProxy) stopProcess() {
	if kp.cmd == nil || kp.cmd.Process == nil {
		return
	}
	select {
	case <-kp.waited:
		return
	default:
	}
	kp.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-kp.waited:
	case <-time.After(5 * time.Second):
		kp.cmd.Process.Kill()
		<-kp.waited
	}
}

// exited reports kube-proxy's exit, if it has exited.
func (kp *kubeProxy) exited() (bool, error) {
	select {
	case <-kp.waited:
		kp.exitMu.Lock()
		defer kp.exitMu.Unlock()
		return true, kp.exit
	default:
		return false, nil
	}
}

// toolDir is a folder to put first in kube-proxy's PATH: iptables,
// iptables-save and iptables-restore (and the ip6tables ones) linked to
// the backend's multi-call binary, so the backend is chosen without
// touching the host's alternatives (FACTS §3.5), and nft.
func toolDir(dir string, cfg proxyConfig) (string, error) {
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", err
	}
	faults := filepath.Join(dir, faultFile)
	if cfg.Mode == "iptables" {
		multi, err := netns.LookIPTables(cfg.Backend)
		if err != nil {
			return "", err
		}
		for _, name := range []string{"iptables-save", "ip6tables", "ip6tables-save", "ip6tables-restore"} {
			if err := os.Symlink(multi, filepath.Join(bin, name)); err != nil {
				return "", err
			}
		}
		// iptables notes when kube-proxy's canary monitor creates its
		// canary in the last of its tables (filter): the monitor's
		// interval counts from there (see monitorOrigins).
		if err := os.WriteFile(filepath.Join(bin, "iptables"), []byte(canaryLogger(filepath.Join(dir, canaryFile), multi+" iptables")), 0o755); err != nil {
			return "", err
		}
		// iptables-restore fails while the fault file counts failures
		// left (a scenario's restoreFailures), changing nothing.
		if err := os.WriteFile(filepath.Join(bin, "iptables-restore"), []byte(failingWrapper(faults, "true", multi+" iptables-restore")), 0o755); err != nil {
			return "", err
		}
		return bin, nil
	}
	// nft fails its transactions (`nft -f`, not `--check`) the same way
	// (a scenario's transactionFailures); listings and checks run.
	nft, err := exec.LookPath("nft")
	if err != nil {
		for _, p := range []string{"/usr/sbin/nft", "/sbin/nft"} {
			if _, serr := os.Stat(p); serr == nil {
				nft, err = p, nil
				break
			}
		}
	}
	if err != nil {
		return "", fmt.Errorf("nft is not installed: run netns/hostdeps.sh")
	}
	transaction := `case " $* " in *" -f "*) case " $* " in *" --check "*|*" -c "*) false ;; *) true ;; esac ;; *) false ;; esac`
	if err := os.WriteFile(filepath.Join(bin, "nft"), []byte(failingWrapper(faults, transaction, nft)), 0o755); err != nil {
		return "", err
	}
	return bin, nil
}

// canaryFile, in the run's folder, lists the instants (Unix seconds) at
// which kube-proxy's iptables canary monitor created its canary chain in
// the filter table, the last of its three: the start of each of its
// intervals.
const canaryFile = "canary-ensured"

// canaryLogger is a shell script that runs real with its arguments, and
// first appends the time to log when they create the canary chain in the
// filter table (`iptables -w 5 -N KUBE-PROXY-CANARY -t filter`,
// pkg/util/iptables/iptables.go EnsureChain).
func canaryLogger(log, real string) string {
	return fmt.Sprintf(`#!/bin/sh
case " $* " in *" -N KUBE-PROXY-CANARY -t filter "*) date +%%s.%%N >> %q ;; esac
exec %s "$@"
`, log, real)
}

// canaryEnsured reads canaryFile: the instants the monitor created its
// filter canary, in order.
func (kp *kubeProxy) canaryEnsured() ([]time.Time, error) {
	b, err := os.ReadFile(filepath.Join(kp.dir, canaryFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []time.Time
	for _, l := range strings.Fields(string(b)) {
		f, err := strconv.ParseFloat(l, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", canaryFile, l, err)
		}
		sec := int64(f)
		out = append(out, time.Unix(sec, int64((f-float64(sec))*1e9)))
	}
	return out, nil
}

// faultFile, in the run's folder, holds how many of kube-proxy's
// dataplane writes are still to fail.
const faultFile = "dataplane-failures"

// failingWrapper is a shell script that fails (exit 1, nothing done) when
// the command line passes test and the fault file counts failures left,
// counting one down; otherwise it runs real with the same arguments.
func failingWrapper(faults, test, real string) string {
	return fmt.Sprintf(`#!/bin/sh
f=%q
if %s; then
  n=$(cat "$f" 2>/dev/null || echo 0)
  if [ "${n:-0}" -gt 0 ]; then
    echo $((n - 1)) > "$f"
    echo "realcp: injected failure" >&2
    exit 1
  fi
fi
exec %s "$@"
`, faults, test, real)
}

// injectFailures makes the next n dataplane writes fail.
func (kp *kubeProxy) injectFailures(n int) error {
	f := filepath.Join(kp.dir, faultFile)
	old := 0
	if b, err := os.ReadFile(f); err == nil {
		old, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	return os.WriteFile(f, []byte(strconv.Itoa(old+n)+"\n"), 0o644)
}

// flush empties iptables tables in kube-proxy's namespace behind its back,
// as an operator does: `iptables -t TABLE -F` then `-X`, through the
// backend kube-proxy uses (the scenario's iptablesFlush step).
func (kp *kubeProxy) flush(tables []string) error {
	if kp.cfg.Mode != "iptables" {
		return fmt.Errorf("an iptables flush in %s mode", kp.cfg.Mode)
	}
	ipt, err := kp.ns.IPTables(kp.cfg.Backend)
	if err != nil {
		return err
	}
	for _, t := range tables {
		if err := ipt.Flush(t); err != nil {
			return err
		}
	}
	return nil
}

// snapshotter reads the kernel's tables kube-proxy writes, in the
// namespace: iptables-save of filter and nat through the backend, or
// `nft list table ip kube-proxy`.
func snapshotter(ns *netns.Namespace, cfg proxyConfig) func() (string, error) {
	if cfg.Mode == "nftables" {
		return func() (string, error) {
			nft, err := ns.NFTables("ip", "kube-proxy")
			if err != nil {
				return "", err
			}
			return nft.ListTable("ip", "kube-proxy")
		}
	}
	return func() (string, error) {
		ipt, err := ns.IPTables(cfg.Backend)
		if err != nil {
			return "", err
		}
		return ipt.SaveAll()
	}
}

// kubeconfigYAML points kube-proxy at the relay, with the API server's
// loopback credentials (its CA, the server name on its certificate, a
// token).
func kubeconfigYAML(cp *controlPlane, port int) string {
	c := cp.config
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: realcp
  cluster:
    server: https://127.0.0.1:%d
    certificate-authority-data: %s
    tls-server-name: %s
users:
- name: kube-proxy
  user:
    token: %s
contexts:
- name: realcp
  context: {cluster: realcp, user: kube-proxy}
current-context: realcp
`, port, b64(c.TLSClientConfig.CAData), c.TLSClientConfig.ServerName, c.BearerToken)
}

// startRelay listens on the namespace's loopback (the host's 127.0.0.1 is
// another interface, out of the namespace's reach) and relays each
// connection to the API server's port on the host.
func (kp *kubeProxy) startRelay(hostPort int) error {
	err := kp.ns.Do(func() error {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(apiPort)))
		kp.relay = l
		return err
	})
	if err != nil {
		return fmt.Errorf("relay in %s: %w", kp.ns.Name, err)
	}
	go func() {
		for {
			in, err := kp.relay.Accept()
			if err != nil {
				return
			}
			go func() {
				defer in.Close()
				out, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(hostPort)))
				if err != nil {
					return
				}
				defer out.Close()
				done := make(chan struct{}, 2)
				go func() { io.Copy(out, in); done <- struct{}{} }()
				go func() { io.Copy(in, out); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	return nil
}

// metrics scrapes kube-proxy's /metrics through a socket opened inside its
// namespace.
func (kp *kubeProxy) metrics() (string, error) {
	var conn net.Conn
	err := kp.ns.Do(func() error {
		var err error
		conn, err = net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(metricsPort)), 5*time.Second)
		return err
	})
	if err != nil {
		return "", err
	}
	used := false
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			if used {
				return nil, errors.New("one connection per scrape")
			}
			used = true
			return conn, nil
		},
	}}
	resp, err := client.Get("http://kube-proxy/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("/metrics: %s", resp.Status)
	}
	return string(b), err
}

// realSync is one sync as kube-proxy logged it, and the kernel's tables
// read right after its completion line.
type realSync struct {
	Start, End time.Time
	Elapsed    time.Duration
	Full       bool
	Failed     bool
	// Forced: the canary monitor's sync after a flush
	// (forceSyncProxyRules, outside the runner), told by its "Reloading
	// after iptables flush" line just before.
	Forced    bool
	Dataplane string
	SnapErr   error
	// StartProbe is kube-proxy's CPU times read at the start line (with
	// CPUProbe; Dataplane then holds them read at the end line).
	StartProbe string
	// Overlapped: the next sync started before the snapshot was read, so
	// the snapshot may hold that sync's work.
	Overlapped bool
}

// syncLog turns kube-proxy's -v=2 log into syncs: "Syncing iptables
// rules" / "Syncing nftables rules" with fullSync at the start, "Sync
// failed", and "SyncProxyRules complete" with elapsed, from its deferred
// function ([K] pkg/proxy/iptables/proxier.go and
// pkg/proxy/nftables/proxier.go syncProxyRules).
type syncLog struct {
	snapshot func() (string, error)
	// atStart, if set, is read at each start line into StartProbe.
	atStart func() (string, error)
	mu      sync.Mutex
	syncs   []realSync
	lines   []string // every line, for failure reports
	// reloading: the monitor announced a forced sync, not started yet.
	reloading bool
	changed   chan struct{}
}

func newSyncLog(snapshot func() (string, error)) *syncLog {
	return &syncLog{snapshot: snapshot, changed: make(chan struct{}, 1)}
}

// klogLine is klog's text header, then the message and its values.
var klogLine = regexp.MustCompile(`^([IWEF])(\d{4} \d{2}:\d{2}:\d{2}\.\d{6})\s+\d+ [^\]]+\] "((?:[^"\\]|\\.)*)"(.*)$`)

var kvElapsed = regexp.MustCompile(`elapsed="([^"]+)"`)
var kvFull = regexp.MustCompile(`fullSync=(true|false)`)
var kvFamily = regexp.MustCompile(`ipFamily="([^"]+)"`)

// klogTime reads a klog header's time (no year: this year, local time).
func klogTime(s string) (time.Time, error) {
	now := time.Now()
	t, err := time.ParseInLocation("0102 15:04:05.000000", s, time.Local)
	if err != nil {
		return time.Time{}, err
	}
	return t.AddDate(now.Year(), 0, 0), nil
}

func (l *syncLog) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		l.mu.Lock()
		l.lines = append(l.lines, line)
		l.mu.Unlock()
		m := klogLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if f := kvFamily.FindStringSubmatch(m[4]); f != nil && f[1] != "IPv4" {
			continue
		}
		at, err := klogTime(m[2])
		if err != nil {
			continue
		}
		msg, kv := m[3], m[4]
		switch {
		case msg == "Reloading after iptables flush":
			l.mu.Lock()
			l.reloading = true
			l.mu.Unlock()
		case msg == "Syncing iptables rules" || msg == "Syncing nftables rules":
			s := realSync{Start: at}
			if f := kvFull.FindStringSubmatch(kv); f != nil {
				s.Full = f[1] == "true"
			}
			if l.atStart != nil {
				s.StartProbe, _ = l.atStart()
			}
			l.mu.Lock()
			if n := len(l.syncs); n > 0 && l.syncs[n-1].End.IsZero() {
				// cannot happen: syncProxyRules holds its mutex
				l.syncs[n-1].Failed = true
			}
			s.Forced, l.reloading = l.reloading, false
			l.syncs = append(l.syncs, s)
			l.mu.Unlock()
		case msg == "Sync failed":
			l.mu.Lock()
			if n := len(l.syncs); n > 0 {
				l.syncs[n-1].Failed = true
			}
			l.mu.Unlock()
		case msg == "SyncProxyRules complete":
			var el time.Duration
			if e := kvElapsed.FindStringSubmatch(kv); e != nil {
				el, _ = time.ParseDuration(e[1])
			}
			l.mu.Lock()
			n := len(l.syncs)
			if n == 0 || !l.syncs[n-1].End.IsZero() {
				l.mu.Unlock()
				continue // the not-initialized early return logs no start
			}
			l.syncs[n-1].End, l.syncs[n-1].Elapsed = at, el
			l.mu.Unlock()
			snap, err := l.snapshot()
			l.mu.Lock()
			l.syncs[n-1].Dataplane, l.syncs[n-1].SnapErr = snap, err
			l.syncs[n-1].Overlapped = len(l.syncs) > n
			l.mu.Unlock()
			select {
			case l.changed <- struct{}{}:
			default:
			}
		}
	}
}

// Syncs lists the syncs logged so far.
func (l *syncLog) Syncs() []realSync {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]realSync(nil), l.syncs...)
}

// Tail is the log's last n lines.
func (l *syncLog) Tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	from := max(0, len(l.lines)-n)
	return strings.Join(l.lines[from:], "\n")
}

// waitSyncs waits until n syncs have completed (and been snapshotted).
func (l *syncLog) waitSyncs(n int, timeout time.Duration) error {
	deadline := time.After(timeout)
	for {
		done := 0
		for _, s := range l.Syncs() {
			if !s.End.IsZero() && (s.Dataplane != "" || s.SnapErr != nil) {
				done++
			}
		}
		if done >= n {
			return nil
		}
		select {
		case <-l.changed:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			return fmt.Errorf("%d of %d syncs after %v", done, n, timeout)
		}
	}
}
