package netns

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/proxysim/proxysim/sim/iptables"
)

// IPTablesBackend is which of iptables' two kernel interfaces programs the
// rules: nf_tables (Debian's default) or the legacy x_tables.
type IPTablesBackend string

const (
	NFT    IPTablesBackend = "nft"
	Legacy IPTablesBackend = "legacy"
)

// IPTablesBackends are both, in the order the suites run them.
var IPTablesBackends = []IPTablesBackend{NFT, Legacy}

// Binary is the multi-call binary Debian's iptables package ships for the
// backend. It dispatches on its first argument (`xtables-nft-multi
// iptables-restore ...`), so the backend is chosen per call and the host's
// update-alternatives links are never read or changed.
func (b IPTablesBackend) Binary() string { return "xtables-" + string(b) + "-multi" }

// DoctorHint ends the errors that say something is not installed: the
// command that says what this machine lacks and how to install it. It names
// no file of the repository: a `go install` user has none.
const DoctorHint = "run `proxysim doctor` to see what this machine lacks and how to install it"

// ErrNoIPTables says the iptables user-space tools are not installed.
var ErrNoIPTables = errors.New("iptables is not installed (no xtables-nft-multi / xtables-legacy-multi; Debian's and Ubuntu's package iptables has both): " + DoctorHint)

// LookIPTables finds the backend's binary in PATH or /usr/sbin (root's
// PATH may lack sbin in some shells).
func LookIPTables(b IPTablesBackend) (string, error) {
	if b != NFT && b != Legacy {
		return "", fmt.Errorf("unknown iptables backend %q (want nft or legacy)", b)
	}
	if p, err := exec.LookPath(b.Binary()); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		p := dir + "/" + b.Binary()
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", b.Binary(), ErrNoIPTables)
}

// xtablesLock is the lock file of the legacy backend. iptables-legacy
// serialises writers with a file lock, /run/xtables.lock by default: a
// file of the host's, which proxysim leaves alone (XTABLES_LOCKFILE moves
// it). One fixed path, so a killed run leaves no file per run behind.
const xtablesLock = "/tmp/proxysim-xtables.lock"

// IPTables is the real iptables of one namespace, driven the way
// kube-proxy drives it (pkg/util/iptables/iptables.go: restoreInternal,
// EnsureChain, EnsureRule, SaveInto), through one backend. It implements
// sim/iptables.Dataplane.
type IPTables struct {
	ns      *Namespace
	backend IPTablesBackend
	bin     string
}

var _ iptables.Dataplane = (*IPTables)(nil)

// IPTables returns n's iptables through backend b.
func (n *Namespace) IPTables(b IPTablesBackend) (*IPTables, error) {
	bin, err := LookIPTables(b)
	if err != nil {
		return nil, err
	}
	return &IPTables{ns: n, backend: b, bin: bin}, nil
}

// Backend is the backend the rules go through.
func (i *IPTables) Backend() IPTablesBackend { return i.backend }

// run executes `<multi-binary> tool args...` inside the namespace
// (runIn), with stdin, and returns stdout; a failure carries stderr.
func (i *IPTables) run(stdin string, tool string, args ...string) (string, error) {
	out, stderr, err := i.ns.runIn(i.bin, append([]string{tool}, args...), stdin, "XTABLES_LOCKFILE="+xtablesLock)
	if err != nil {
		return out, &iptables.RestoreError{Msg: fmt.Sprintf("%s %s (%s): %s", tool, strings.Join(args, " "), i.backend, failure(stderr, err))}
	}
	return out, nil
}

// Restore is `iptables-restore --noflush --counters -w 5` of the payload,
// as kube-proxy runs it: the kernel takes all of it or none of it.
func (i *IPTables) Restore(payload string) error {
	_, err := i.run(payload, "iptables-restore", "--noflush", "--counters", "-w", "5")
	return err
}

// Save is `iptables-save -t table`, as the kernel prints it.
func (i *IPTables) Save(table string) (string, error) {
	return i.run("", "iptables-save", "-t", table)
}

// SaveAll is iptables-save of the tables kube-proxy writes, filter then
// nat.
func (i *IPTables) SaveAll() (string, error) {
	var b strings.Builder
	for _, t := range iptables.Tables {
		s, err := i.Save(t)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// EnsureChain creates a chain unless it exists (`iptables -N`; "already
// exists" is success, as kube-proxy reads it).
func (i *IPTables) EnsureChain(table, chain string) error {
	_, err := i.run("", "iptables", "-w", "5", "-t", table, "-N", chain)
	if err != nil && strings.Contains(err.Error(), "already exists") {
		return nil
	}
	return err
}

// ChainExists is `iptables -t table -S chain`: a chain that is not there
// makes it fail with "No chain/target/match by that name", which is a
// no; any other failure is an error. (iptables-nft 1.8.9 says a missing
// chain "is incompatible, use 'nft' tool": an error, which the canary
// monitor, like kube-proxy's, reads as a no too.)
func (i *IPTables) ChainExists(table, chain string) (bool, error) {
	_, err := i.run("", "iptables", "-w", "5", "-t", table, "-S", chain)
	switch {
	case err == nil:
		return true, nil
	case strings.Contains(err.Error(), "No chain/target/match"):
		return false, nil
	}
	return false, err
}

// Flush is `iptables -t table -F` then `iptables -t table -X`: every rule
// of the table and every user chain gone, as an operator's flush or a
// firewall reload leaves it. Only the namespace's tables are touched.
func (i *IPTables) Flush(table string) error {
	if _, err := i.run("", "iptables", "-w", "5", "-t", table, "-F"); err != nil {
		return err
	}
	_, err := i.run("", "iptables", "-w", "5", "-t", table, "-X")
	return err
}

// EnsureRule prepends a rule unless the kernel already holds it: `-C`
// compares the rule the kernel's way (by its parsed matches, not its text),
// then `-I chain 1`.
func (i *IPTables) EnsureRule(table, chain, rule string) error {
	words, err := splitRule(rule)
	if err != nil {
		return err
	}
	check := append([]string{"-w", "5", "-t", table, "-C", chain}, words...)
	if _, err := i.run("", "iptables", check...); err == nil {
		return nil
	}
	insert := append([]string{"-w", "5", "-t", table, "-I", chain, "1"}, words...)
	_, err = i.run("", "iptables", insert...)
	return err
}

// splitRule splits rule text into arguments the way iptables-restore
// reads a line: spaces separate words, double quotes keep a word whole.
func splitRule(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	quoted, inWord := false, false
	for _, c := range s {
		switch {
		case c == '"':
			quoted, inWord = !quoted, true
		case c == ' ' && !quoted:
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(c)
			inWord = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote in rule %q", s)
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}

// Version is the first line of `iptables --version` ("iptables v1.8.9
// (nf_tables)").
func (i *IPTables) Version() (string, error) {
	out, err := i.run("", "iptables", "--version")
	return strings.TrimSpace(out), err
}
