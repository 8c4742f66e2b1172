package scenarios

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	kpv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	sigsjson "sigs.k8s.io/json"
)

// KubeProxyConfig is proxy.config: a kube-proxy configuration file (a
// KubeProxyConfiguration, kubeproxy.config.k8s.io/v1alpha1, or the
// kube-proxy ConfigMap that holds one), decoded strictly with the published
// k8s.io/kube-proxy types, defaulted as kube-proxy defaults it, checked by
// its rules, and mapped onto the scenario's proxy settings. A setting the
// scenario gives itself wins over the file's.
//
// Every setting the file gives a value other than kube-proxy's default is
// either mapped (Use) or listed in a warning: none is dropped silently.
type KubeProxyConfig struct {
	// File names the file in problems and warnings.
	File string
	// Config is the configuration as kube-proxy runs with it: defaults
	// applied.
	Config kpv1alpha1.KubeProxyConfiguration

	root  *yaml.Node // the configuration's mapping, at its place in File
	proxy *yaml.Node // the scenario's proxy mapping
	d     *decoder
	used  map[string]bool
	// changed are the settings whose value is not kube-proxy's default.
	changed []string
	values  map[string]any // the defaulted configuration, flattened
}

// KubeProxyConfigurer is implemented by a mode that takes its own settings
// from a kube-proxy configuration file: the sync periods of its section of
// the file (kube-proxy reads syncPeriod and minSyncPeriod from the section
// of the mode it runs) and whatever else it models. Each mapping goes
// through SetFromConfig (or SetDuration), which leaves a setting the scenario gives
// and marks the file's field as modelled; a field that no mode takes is
// listed as not modelled. It runs before the mode's Settings.Validate.
type KubeProxyConfigurer interface {
	FromKubeProxyConfig(c *KubeProxyConfig, p *Proxy)
}

// kubeProxyConfigKeys are the ConfigMap keys the configuration is found
// under: kubeadm's (and so kind's), then the EKS add-on's, then others'.
var kubeProxyConfigKeys = []string{"config.conf", "config", "config.yaml", "kube-proxy-config.yaml"}

// Explicit reports whether the scenario's proxy mapping gives key itself
// (a dotted path for nested keys, such as ipvsTimeouts.tcp).
func (c *KubeProxyConfig) Explicit(key string) bool {
	n := c.proxy
	for _, k := range strings.Split(key, ".") {
		if n == nil {
			return false
		}
		n = valueNode(n, k)
	}
	return n != nil
}

// Use marks fields of the file (their JSON paths, such as ipvs.scheduler,
// or a prefix of them) as modelled.
func (c *KubeProxyConfig) Use(fields ...string) {
	for _, f := range fields {
		c.used[f] = true
	}
}

// SetFromConfig gives dst the file's value v, unless the scenario sets key itself,
// and marks field as modelled.
func SetFromConfig[T any](c *KubeProxyConfig, key string, dst *T, v T, field string) {
	c.Use(field)
	if !c.Explicit(key) {
		*dst = v
	}
}

// SetDuration is SetFromConfig for an optional scenario duration.
func (c *KubeProxyConfig) SetDuration(key string, dst **Duration, v metav1.Duration, field string) {
	d := Duration(v.Duration)
	SetFromConfig(c, key, dst, &d, field)
}

// SyncPeriods maps the sync periods of a mode's section of the file
// (section is ipvs, iptables or nftables) onto the proxy's.
func (c *KubeProxyConfig) SyncPeriods(p *Proxy, section string, sync, minSync metav1.Duration) {
	c.SetDuration("syncPeriod", &p.SyncPeriod, sync, section+".syncPeriod")
	c.SetDuration("minSyncPeriod", &p.MinSyncPeriod, minSync, section+".minSyncPeriod")
}

// ClusterCIDRDetector maps the ClusterCIDR local-traffic detector
// (detectLocalMode ClusterCIDR with clusterCIDR) onto dst, the one detector
// the iptables and nftables modes model: the first IPv4 CIDR of the
// comma-separated list; any other is a warning naming mode. Another
// detectLocalMode is left unused, so it is listed as not modelled.
func (c *KubeProxyConfig) ClusterCIDRDetector(mode string, dst *string) {
	if c.Config.DetectLocalMode != "ClusterCIDR" {
		return
	}
	c.Use("detectLocalMode")
	if c.Config.ClusterCIDR == "" {
		return
	}
	c.Use("clusterCIDR")
	var v4 string
	for _, s := range strings.Split(c.Config.ClusterCIDR, ",") {
		s = strings.TrimSpace(s)
		if ip, _, err := net.ParseCIDR(s); err == nil && ip.To4() != nil && v4 == "" {
			v4 = s
		} else {
			c.Warnf("clusterCIDR", "%s is not modelled (the %s mode models IPv4 only): ignored", s, mode)
		}
	}
	if v4 != "" {
		SetFromConfig(c, "clusterCIDR", dst, v4, "clusterCIDR")
	}
}

// Errorf reports a problem with a field's value, at its place in the file.
func (c *KubeProxyConfig) Errorf(field, format string, args ...any) {
	n := valueAt(c.root, field)
	c.d.problems = append(c.d.problems, Problem{File: c.File, Line: n.Line, Column: n.Column, Path: field, Msg: fmt.Sprintf(format, args...)})
}

// Warnf notes something about a field's value that is not an error.
func (c *KubeProxyConfig) Warnf(field, format string, args ...any) {
	n := valueAt(c.root, field)
	c.d.skipped = append(c.d.skipped, Problem{File: c.File, Line: n.Line, Column: n.Column, Path: field, Msg: fmt.Sprintf(format, args...)})
}

// readKubeProxyConfig reads proxy.config (ref, the value node), reporting
// every problem at its place in the file; nil if it cannot be used.
func readKubeProxyConfig(d *decoder, s *Scenario, proxy, ref *yaml.Node) *KubeProxyConfig {
	if ref.Kind != yaml.ScalarNode || ref.Value == "" {
		d.add(ref, "proxy.config", "want the path of a kube-proxy configuration file, relative to the scenario")
		return nil
	}
	data, err := s.folder.read(ref.Value)
	if err != nil {
		d.add(ref, "proxy.config", "%v", err)
		return nil
	}
	c := &KubeProxyConfig{File: path.Join(path.Dir(filepath.ToSlash(s.File)), ref.Value), proxy: proxy, d: d, used: map[string]bool{}}
	fail := func(n *yaml.Node, field, format string, args ...any) *KubeProxyConfig {
		line, col := 1, 1
		if n != nil {
			line, col = n.Line, n.Column
		}
		d.problems = append(d.problems, Problem{File: c.File, Line: line, Column: col, Path: field, Msg: fmt.Sprintf(format, args...)})
		return nil
	}
	root, text, p := findKubeProxyConfiguration(data)
	if p != nil {
		p.File = c.File
		d.problems = append(d.problems, *p)
		return nil
	}
	c.root = root
	// kube-proxy's reading: strict, then lenient if only strictness failed
	// (see kubeproxyconfig_lenient.go).
	asJSON := configIsJSON(text)
	var lenient []lenientField
	for _, dup := range duplicateFields(root, "") {
		lenient = append(lenient, duplicateLenient(dup, asJSON))
	}
	if !asJSON {
		keepLastDuplicates(root)
	}
	if gv := lastValueOf(root, "apiVersion"); gv != kpv1alpha1.SchemeGroupVersion.String() {
		return fail(valueAt(root, "apiVersion"), "apiVersion", "want %s, got %q", kpv1alpha1.SchemeGroupVersion, gv)
	}
	var doc []byte
	if asJSON {
		// The text itself, as kube-proxy decodes it: a duplicated field's
		// values are decoded in turn, as encoding/json does.
		doc = text
	} else {
		var buf bytes.Buffer
		count := 0
		if err := nodeJSON(&buf, root, &count); err != nil {
			if errors.Is(err, errTooManyNodes) {
				return fail(root, "(configuration)", "configuration too large: more than %d nodes after alias expansion", maxJSONNodes)
			}
			return fail(root, "(configuration)", "%v", err)
		}
		doc = buf.Bytes()
	}
	// The strict errors do not change what is decoded: c.Config is what
	// the lenient reading gives.
	strictErrs, err := sigsjson.UnmarshalStrict(doc, &c.Config)
	if err != nil {
		if ok, off := sigsjson.SyntaxErrorOffset(err); ok {
			at := root
			if len(text) == len(data) { // the file itself: the exact place
				at = positionOf(data, off-1) // the offset is past the bad byte
			}
			return fail(at, "(configuration)", "kube-proxy reads a configuration that starts with \"{\" as JSON: %v", err)
		}
		field := fieldOfDecodeError(root, err)
		return fail(valueAt(root, field), field, "%s", decodeMessage(err))
	}
	unknown := map[string]bool{}
	for _, e := range strictErrs {
		switch m := unknownFieldRE.FindStringSubmatch(e.Error()); {
		case m != nil && !unknown[m[1]]:
			unknown[m[1]] = true
			lenient = append(lenient, unknownLenient(root, m[1]))
		case m != nil:
		case strings.Contains(e.Error(), "duplicate field"):
			// A JSON file's duplicates, listed above with both places.
		default:
			fail(root, "", "%v", e)
		}
	}
	slices.SortStableFunc(lenient, func(a, b lenientField) int {
		return cmp.Or(cmp.Compare(a.at.Line, b.at.Line), cmp.Compare(a.at.Column, b.at.Column))
	})
	for _, l := range lenient {
		p := Problem{File: c.File, Line: l.at.Line, Column: l.at.Column, Path: l.path, Msg: l.lenient}
		if d.strict {
			p.Msg = l.strict
			d.problems = append(d.problems, p)
		} else {
			d.skipped = append(d.skipped, p)
		}
	}
	refusedMode := func() *KubeProxyConfig {
		mode := string(c.Config.Mode)
		if mode == "" {
			mode = "iptables" // kube-proxy's default on Linux
		}
		d.kpcMode, _ = LookupMode(mode)
		return nil
	}
	if d.strict && len(lenient) > 0 {
		return refusedMode()
	}
	before := len(d.problems)
	c.validateGiven()
	defaultKubeProxyConfig(&c.Config)
	c.validate()
	if len(d.problems) > before {
		return refusedMode()
	}
	c.values, c.changed = changedSettings(&c.Config)
	return c
}

// findKubeProxyConfiguration finds the configuration's mapping in a file:
// the file itself, one document of several (a kubeadm configuration file),
// or the value of a kube-proxy ConfigMap's key, placed at its lines in the
// file. text is what kube-proxy would read: the file, or the key's value.
func findKubeProxyConfiguration(data []byte) (root *yaml.Node, text []byte, p *Problem) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var kinds []string
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			ps := syntaxProblem("", err).(Problems)
			return nil, nil, &ps[0]
		}
		if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
			continue
		}
		root := doc.Content[0]
		switch kind := lastValueOf(root, "kind"); kind {
		case "KubeProxyConfiguration":
			return root, data, nil
		case "ConfigMap":
			return configMapValue(data, root)
		default:
			kinds = append(kinds, strconv.Quote(kind))
		}
	}
	return nil, nil, &Problem{Line: 1, Column: 1, Path: "kind", Msg: fmt.Sprintf("want a KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1) or the kube-proxy ConfigMap holding one, found kind %s", strings.Join(kinds, ", "))}
}

// positionOf is a byte offset's line and column in text.
func positionOf(text []byte, off int64) *yaml.Node {
	off = min(max(off, 0), int64(len(text)))
	before := text[:off]
	line := 1 + bytes.Count(before, []byte("\n"))
	return &yaml.Node{Line: line, Column: 1 + len(before) - (bytes.LastIndexByte(before, '\n') + 1)}
}

// lastValueOf is the value of a mapping's key given last, as kube-proxy's
// lenient reading keeps it.
func lastValueOf(n *yaml.Node, key string) string {
	v := ""
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			v = n.Content[i+1].Value
		}
	}
	return v
}

// configMapValue parses the configuration held under one of
// kubeProxyConfigKeys in a ConfigMap's data, with the file's lines and
// columns.
func configMapValue(data []byte, cm *yaml.Node) (*yaml.Node, []byte, *Problem) {
	at := func(n *yaml.Node, field, format string, args ...any) (*yaml.Node, []byte, *Problem) {
		return nil, nil, &Problem{Line: n.Line, Column: n.Column, Path: field, Msg: fmt.Sprintf(format, args...)}
	}
	dataNode := valueNode(cm, "data")
	if dataNode == nil || dataNode.Kind != yaml.MappingNode {
		return at(cm, "data", "a kube-proxy ConfigMap holds its configuration in data.%s", kubeProxyConfigKeys[0])
	}
	var val *yaml.Node
	var key string
	for _, k := range kubeProxyConfigKeys {
		if v := valueNode(dataNode, k); v != nil {
			val, key = v, k
			break
		}
	}
	if val == nil {
		var keys []string
		for i := 0; i+1 < len(dataNode.Content); i += 2 {
			keys = append(keys, dataNode.Content[i].Value)
		}
		return at(dataNode, "data", "no KubeProxyConfiguration under %s (keys: %s)", orList(kubeProxyConfigKeys), strings.Join(keys, ", "))
	}
	field := "data." + key
	if val.Kind != yaml.ScalarNode {
		return at(val, field, "want the configuration as text, got a %s", kindName(val))
	}
	var inner yaml.Node
	if err := yaml.Unmarshal([]byte(val.Value), &inner); err != nil {
		return at(val, field, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(inner.Content) == 0 || inner.Content[0].Kind != yaml.MappingNode {
		return at(val, field, "want a KubeProxyConfiguration mapping")
	}
	// A block scalar's text starts on the next line, at the indent of its
	// first line; any other scalar's positions are the scalar's own.
	lines := bytes.Split(data, []byte("\n"))
	indent, ok := 0, false
	if val.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		for i := val.Line; i < len(lines); i++ {
			if t := bytes.TrimSpace(lines[i]); len(t) > 0 {
				indent, ok = indentOf(lines[i]), true
				break
			}
		}
	}
	walk := []*yaml.Node{inner.Content[0]}
	for len(walk) > 0 {
		n := walk[len(walk)-1]
		walk = walk[:len(walk)-1]
		if ok {
			n.Line += val.Line
			n.Column += indent
		} else {
			n.Line, n.Column = val.Line, val.Column
		}
		walk = append(walk, n.Content...)
	}
	return inner.Content[0], []byte(val.Value), nil
}

// fieldOfDecodeError finds the field a decoding error is about: the path
// the decoder names, or else the first field that fails alone.
func fieldOfDecodeError(root *yaml.Node, err error) string {
	var fe sigsjson.FieldError
	if errors.As(err, &fe) && fe.FieldPath() != "" {
		return fe.FieldPath()
	}
	for _, p := range leafPaths(root, "") {
		var buf bytes.Buffer
		count := 0
		if nodeJSON(&buf, findPathValue(root, p), &count) != nil {
			return p
		}
		doc := buf.String()
		segs := strings.Split(p, ".")
		for i := len(segs) - 1; i >= 0; i-- {
			k, _ := json.Marshal(segs[i])
			doc = "{" + string(k) + ":" + doc + "}"
		}
		var probe kpv1alpha1.KubeProxyConfiguration
		if _, err := sigsjson.UnmarshalStrict([]byte(doc), &probe); err != nil {
			return p
		}
	}
	return ""
}

// decodeMessage words a decoding error for the person at the terminal.
func decodeMessage(err error) string {
	msg := err.Error()
	if strings.Contains(msg, "time: ") {
		return "want a duration such as 1s or 15m0s: " + msg
	}
	return strings.TrimPrefix(msg, "json: ")
}

// leafPaths lists the dotted paths of a mapping's scalar and list leaves.
func leafPaths(n *yaml.Node, prefix string) []string {
	if n.Kind != yaml.MappingNode {
		return []string{prefix}
	}
	var out []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		out = append(out, leafPaths(n.Content[i+1], join(prefix, n.Content[i].Value))...)
	}
	return out
}

// valueAt is the value node at a field path (such as
// nodePortAddresses[1]), or the deepest node reached.
func valueAt(root *yaml.Node, field string) *yaml.Node {
	if field == "" {
		return root
	}
	// findPath stops at a plain last segment's key; one more, empty,
	// segment takes it to the value.
	return findPath(root, field+".")
}

// findPathValue is the value node at a dotted path (no indices).
func findPathValue(n *yaml.Node, p string) *yaml.Node {
	for _, k := range strings.Split(p, ".") {
		v := valueNode(n, k)
		if v == nil {
			return n
		}
		n = v
	}
	return n
}

// defaultKubeProxyConfig applies the defaults kube-proxy applies to a
// v1alpha1 configuration before it runs: kubernetes v1.36
// pkg/proxy/apis/config/v1alpha1/defaults.go
// (SetDefaults_KubeProxyConfiguration), and for Linux
// cmd/kube-proxy/app/server_linux.go (platformApplyDefaults: the mode,
// nftables' nodePortAddresses, detectLocalMode).
func defaultKubeProxyConfig(c *kpv1alpha1.KubeProxyConfiguration) {
	orDuration := func(d *metav1.Duration, v time.Duration) {
		if d.Duration == 0 {
			d.Duration = v
		}
	}
	orInt := func(p **int32, v int32) {
		if *p == nil {
			*p = &v
		}
	}
	orTimeout := func(p **metav1.Duration, v time.Duration) {
		if *p == nil {
			*p = &metav1.Duration{Duration: v}
		}
	}
	if c.BindAddress == "" {
		c.BindAddress = "0.0.0.0"
	}
	healthz, metrics := "0.0.0.0", "127.0.0.1"
	if ip := net.ParseIP(c.BindAddress); ip == nil || ip.To4() == nil {
		healthz, metrics = "[::]", "[::1]"
	}
	c.HealthzBindAddress = withPort(c.HealthzBindAddress, healthz, 10256)
	c.MetricsBindAddress = withPort(c.MetricsBindAddress, metrics, 10249)
	orInt(&c.OOMScoreAdj, -999)
	orDuration(&c.IPTables.SyncPeriod, 30*time.Second)
	orDuration(&c.IPTables.MinSyncPeriod, time.Second)
	if c.IPTables.LocalhostNodePorts == nil {
		t := true
		c.IPTables.LocalhostNodePorts = &t
	}
	// The IPVS section's minSyncPeriod has no default: 0s.
	orDuration(&c.IPVS.SyncPeriod, 30*time.Second)
	orDuration(&c.NFTables.SyncPeriod, 30*time.Second)
	orDuration(&c.NFTables.MinSyncPeriod, time.Second)
	orInt(&c.Conntrack.MaxPerCore, 32*1024)
	orInt(&c.Conntrack.Min, 128*1024)
	orInt(&c.IPTables.MasqueradeBit, 14)
	orInt(&c.NFTables.MasqueradeBit, 14)
	orTimeout(&c.Conntrack.TCPEstablishedTimeout, 24*time.Hour)
	orTimeout(&c.Conntrack.TCPCloseWaitTimeout, time.Hour)
	orDuration(&c.ConfigSyncPeriod, 15*time.Minute)
	if c.ClientConnection.ContentType == "" {
		c.ClientConnection.ContentType = "application/vnd.kubernetes.protobuf"
	}
	if c.ClientConnection.QPS == 0 {
		c.ClientConnection.QPS = 5
	}
	if c.ClientConnection.Burst == 0 {
		c.ClientConnection.Burst = 10
	}
	if c.FeatureGates == nil {
		c.FeatureGates = map[string]bool{}
	}
	logsapi.SetRecommendedLoggingConfiguration(&c.Logging)
	if c.Mode == "" {
		c.Mode = "iptables"
	}
	if c.Mode == "nftables" && len(c.NodePortAddresses) == 0 {
		c.NodePortAddresses = []string{kpv1alpha1NodePortAddressesPrimary}
	}
	if c.DetectLocalMode == "" {
		c.DetectLocalMode = "ClusterCIDR"
	}
}

// kpv1alpha1NodePortAddressesPrimary is nodePortAddresses' special value:
// the node's primary IPs.
const kpv1alpha1NodePortAddressesPrimary = "primary"

// withPort is an address with kube-proxy's default host or port added.
func withPort(addr, defHost string, port int) string {
	if addr == "" {
		return net.JoinHostPort(strings.Trim(defHost, "[]"), strconv.Itoa(port))
	}
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	if ip := net.ParseIP(addr); ip != nil {
		return net.JoinHostPort(addr, strconv.Itoa(port))
	}
	return addr
}

// validateGiven checks what defaulting would hide: negative durations.
func (c *KubeProxyConfig) validateGiven() {
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"iptables.syncPeriod", c.Config.IPTables.SyncPeriod.Duration},
		{"iptables.minSyncPeriod", c.Config.IPTables.MinSyncPeriod.Duration},
		{"ipvs.syncPeriod", c.Config.IPVS.SyncPeriod.Duration},
		{"ipvs.minSyncPeriod", c.Config.IPVS.MinSyncPeriod.Duration},
		{"nftables.syncPeriod", c.Config.NFTables.SyncPeriod.Duration},
		{"nftables.minSyncPeriod", c.Config.NFTables.MinSyncPeriod.Duration},
		{"configSyncPeriod", c.Config.ConfigSyncPeriod.Duration},
		{"ipvs.tcpTimeout", c.Config.IPVS.TCPTimeout.Duration},
		{"ipvs.tcpFinTimeout", c.Config.IPVS.TCPFinTimeout.Duration},
		{"ipvs.udpTimeout", c.Config.IPVS.UDPTimeout.Duration},
		{"conntrack.udpTimeout", c.Config.Conntrack.UDPTimeout.Duration},
		{"conntrack.udpStreamTimeout", c.Config.Conntrack.UDPStreamTimeout.Duration},
	} {
		if d.v < 0 {
			c.Errorf(d.field, "must not be negative, got %v", d.v)
		}
	}
}

// validate checks the defaulted configuration by kube-proxy's rules
// (kubernetes v1.36 pkg/proxy/apis/config/validation/validation.go,
// Validate and its helpers), for Linux.
func (c *KubeProxyConfig) validate() {
	cfg := &c.Config
	switch cfg.Mode {
	case "iptables", "ipvs", "nftables":
	default:
		c.Errorf("mode", "must be iptables, ipvs, nftables or blank (blank means iptables), got %q", cfg.Mode)
	}
	section, sync, minSync := "iptables", cfg.IPTables.SyncPeriod, cfg.IPTables.MinSyncPeriod
	switch cfg.Mode {
	case "ipvs":
		section, sync, minSync = "ipvs", cfg.IPVS.SyncPeriod, cfg.IPVS.MinSyncPeriod
	case "nftables":
		section, sync, minSync = "nftables", cfg.NFTables.SyncPeriod, cfg.NFTables.MinSyncPeriod
	}
	if minSync.Duration > sync.Duration {
		c.Errorf(section+".syncPeriod", "must be at least %s.minSyncPeriod (%v), got %v", section, minSync.Duration, sync.Duration)
	}
	for _, b := range []struct {
		field string
		v     *int32
	}{{"iptables.masqueradeBit", cfg.IPTables.MasqueradeBit}, {"nftables.masqueradeBit", cfg.NFTables.MasqueradeBit}} {
		if *b.v < 0 || *b.v > 31 {
			c.Errorf(b.field, "must be within [0, 31], got %d", *b.v)
		}
	}
	if v := *cfg.OOMScoreAdj; v < -1000 || v > 1000 {
		c.Errorf("oomScoreAdj", "must be within [-1000, 1000], got %d", v)
	}
	if v := *cfg.Conntrack.MaxPerCore; v < 0 {
		c.Errorf("conntrack.maxPerCore", "must not be negative, got %d", v)
	}
	if v := *cfg.Conntrack.Min; v < 0 {
		c.Errorf("conntrack.min", "must not be negative, got %d", v)
	}
	if cfg.Conntrack.TCPEstablishedTimeout.Duration < 0 {
		c.Errorf("conntrack.tcpEstablishedTimeout", "must not be negative")
	}
	if cfg.Conntrack.TCPCloseWaitTimeout.Duration < 0 {
		c.Errorf("conntrack.tcpCloseWaitTimeout", "must not be negative")
	}
	if net.ParseIP(cfg.BindAddress) == nil {
		c.Errorf("bindAddress", "%q is not an IP address", cfg.BindAddress)
	}
	for _, hp := range []struct{ field, v string }{{"healthzBindAddress", cfg.HealthzBindAddress}, {"metricsBindAddress", cfg.MetricsBindAddress}} {
		host, port, err := net.SplitHostPort(hp.v)
		n, perr := strconv.Atoi(port)
		switch {
		case err != nil:
			c.Errorf(hp.field, "want IP:port, got %q", hp.v)
		case net.ParseIP(host) == nil:
			c.Errorf(hp.field, "%q is not an IP address", host)
		case perr != nil || n < 0 || n > 65535:
			c.Errorf(hp.field, "%q is not a port", port)
		}
	}
	primary := slices.Contains(cfg.NodePortAddresses, kpv1alpha1NodePortAddressesPrimary)
	for i, a := range cfg.NodePortAddresses {
		field := fmt.Sprintf("nodePortAddresses[%d]", i)
		if a == kpv1alpha1NodePortAddressesPrimary {
			continue
		}
		if primary {
			c.Errorf(field, "cannot give both %q and CIDRs", kpv1alpha1NodePortAddressesPrimary)
		} else if _, _, err := net.ParseCIDR(a); err != nil {
			c.Errorf(field, "%q is not a CIDR", a)
		}
	}
	for i, a := range cfg.IPVS.ExcludeCIDRs {
		if _, _, err := net.ParseCIDR(a); err != nil && cfg.Mode == "ipvs" {
			c.Errorf(fmt.Sprintf("ipvs.excludeCIDRs[%d]", i), "%q is not a CIDR", a)
		}
	}
	switch cfg.DetectLocalMode {
	case "ClusterCIDR":
		if cfg.ClusterCIDR != "" {
			cidrs := strings.Split(cfg.ClusterCIDR, ",")
			if len(cidrs) > 2 {
				c.Errorf("clusterCIDR", "want one CIDR or a dual-stack pair, got %q", cfg.ClusterCIDR)
			}
			for _, s := range cidrs {
				if _, _, err := net.ParseCIDR(strings.TrimSpace(s)); err != nil {
					c.Errorf("clusterCIDR", "%q is not a CIDR", s)
				}
			}
		}
	case "NodeCIDR":
	case "BridgeInterface":
		if cfg.DetectLocal.BridgeInterface == "" {
			c.Errorf("detectLocal.bridgeInterface", "required with detectLocalMode BridgeInterface")
		}
	case "InterfaceNamePrefix":
		if cfg.DetectLocal.InterfaceNamePrefix == "" {
			c.Errorf("detectLocal.interfaceNamePrefix", "required with detectLocalMode InterfaceNamePrefix")
		}
	default:
		c.Errorf("detectLocalMode", "want ClusterCIDR, NodeCIDR, BridgeInterface, InterfaceNamePrefix or blank, got %q", cfg.DetectLocalMode)
	}
}

// changedSettings flattens a defaulted configuration and lists the settings
// whose value differs from what kube-proxy runs with when the file gives
// nothing.
func changedSettings(cfg *kpv1alpha1.KubeProxyConfiguration) (map[string]any, []string) {
	var def kpv1alpha1.KubeProxyConfiguration
	defaultKubeProxyConfig(&def)
	def.Mode = cfg.Mode // the mode is always mapped; its defaults follow it
	defaultKubeProxyConfig(&def)
	got, want := flatten(cfg), flatten(&def)
	var changed []string
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if k == "apiVersion" || k == "kind" {
			continue
		}
		if fmt.Sprint(got[k]) != fmt.Sprint(want[k]) {
			changed = append(changed, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if _, ok := got[k]; !ok {
			changed = append(changed, k)
		}
	}
	return got, changed
}

// flatten turns a configuration into dotted paths and leaf values, through
// its JSON form (lists are leaves).
func flatten(cfg *kpv1alpha1.KubeProxyConfiguration) map[string]any {
	data, _ := json.Marshal(cfg)
	var m map[string]any
	_ = json.Unmarshal(data, &m)
	out := map[string]any{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if mm, ok := v.(map[string]any); ok && (len(mm) > 0 || prefix == "") {
			for k, e := range mm {
				walk(join(prefix, k), e)
			}
			return
		}
		if mm, ok := v.(map[string]any); ok && len(mm) == 0 {
			return // an empty mapping sets nothing
		}
		out[prefix] = v
	}
	walk("", m)
	return out
}

// isUsed reports whether a setting, or a prefix of it, was mapped.
func (c *KubeProxyConfig) isUsed(field string) bool {
	for f := field; ; {
		if c.used[f] {
			return true
		}
		i := strings.LastIndexByte(f, '.')
		if i < 0 {
			return false
		}
		f = f[:i]
	}
}

// warnUnmodelled lists every changed setting no one mapped.
func (c *KubeProxyConfig) warnUnmodelled(mode string) {
	for _, f := range c.changed {
		if c.isUsed(f) {
			continue
		}
		v, _ := json.Marshal(c.values[f])
		c.Warnf(f, "not modelled by proxysim (mode %s): %s is ignored", mode, v)
	}
}

// applyKubeProxyConfig maps the file onto the proxy: the core's settings,
// then the mode's (KubeProxyConfigurer), then warns of the rest.
func (d *decoder) applyKubeProxyConfig(p *Proxy, m Mode) {
	c := d.kpc
	c.Use("mode", "apiVersion", "kind")
	c.SetDuration("configSyncPeriod", &p.ConfigSyncPeriod, c.Config.ConfigSyncPeriod, "configSyncPeriod")
	if c.Config.HostnameOverride != "" {
		SetFromConfig(c, "nodeName", &p.NodeName, c.Config.HostnameOverride, "hostnameOverride")
	}
	if mc, ok := m.(KubeProxyConfigurer); ok {
		mc.FromKubeProxyConfig(c, p)
	}
	c.warnUnmodelled(p.Mode)
}
