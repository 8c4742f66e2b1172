package fakes

import (
	"strings"
	"testing"

	"github.com/proxysim/proxysim/sim/iptables"
)

const base = `*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-A - [0:0]
-A KUBE-SVC-A -j DNAT --to-destination 10.0.0.1:80
-A KUBE-SERVICES -m tcp -p tcp -d 10.96.0.1 --dport 80 -j KUBE-SVC-A
COMMIT
`

func restored(t *testing.T) *IPTables {
	t.Helper()
	f := NewIPTables()
	if err := f.Restore(base); err != nil {
		t.Fatal(err)
	}
	return f
}

// A restore that fails anywhere changes nothing, in any table.
func TestRestoreIsAllOrNothing(t *testing.T) {
	for name, payload := range map[string]string{
		"jump to an unknown chain":  "*filter\n:KUBE-X - [0:0]\n-A KUBE-X -j DROP\nCOMMIT\n*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j KUBE-NOPE\nCOMMIT\n",
		"malformed rule":            "*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -m tcp --dport 80 -j KUBE-SVC-A\nCOMMIT\n",
		"unknown option":            "*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES --frobnicate -j KUBE-SVC-A\nCOMMIT\n",
		"append to unknown chain":   "*nat\n-A KUBE-NOPE -j KUBE-SVC-A\nCOMMIT\n",
		"delete a referenced chain": "*nat\n:KUBE-SVC-A - [0:0]\n-X KUBE-SVC-A\nCOMMIT\n",
		"DNAT in filter":            "*filter\n:KUBE-X - [0:0]\n-A KUBE-X -j DNAT --to-destination 10.0.0.1:80\nCOMMIT\n",
		"no COMMIT":                 "*nat\n:KUBE-SERVICES - [0:0]\n",
		"unknown table":             "*raw\nCOMMIT\n",
		"DNAT to no port":           "*nat\n:KUBE-X - [0:0]\n-A KUBE-X -j DNAT --to-destination 10.0.0.1:http\nCOMMIT\n",
		"bad probability":           "*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -m statistic --mode random --probability 1.5 -j KUBE-SVC-A\nCOMMIT\n",
	} {
		t.Run(name, func(t *testing.T) {
			f := restored(t)
			before := f.SaveAll()
			if err := f.Restore(payload); err == nil {
				t.Fatalf("restore succeeded:\n%s", f.SaveAll())
			}
			if after := f.SaveAll(); after != before {
				t.Errorf("a failed restore changed the tables:\n%s", after)
			}
		})
	}
}

// --noflush: a chain named in the payload is flushed and refilled, the
// others are kept; a flushed unreferenced chain can be deleted.
func TestRestoreReplacesOnlyTheChainsItNames(t *testing.T) {
	f := restored(t)
	err := f.Restore("*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-A - [0:0]\n-A KUBE-SERVICES -m tcp -p tcp -d 10.96.0.2 --dport 80 -j RETURN\n-X KUBE-SVC-A\nCOMMIT\n")
	if err != nil {
		t.Fatal(err)
	}
	nat, _ := f.Save("nat")
	if strings.Contains(nat, "KUBE-SVC-A") || !strings.Contains(nat, "-d 10.96.0.2") || strings.Contains(nat, "10.96.0.1") {
		t.Errorf("unexpected nat table:\n%s", nat)
	}
	if err := f.Restore("*filter\n:KUBE-Y - [0:0]\nCOMMIT\n"); err != nil {
		t.Fatal(err)
	}
	if nat2, _ := f.Save("nat"); nat2 != nat {
		t.Errorf("a filter restore changed nat:\n%s", nat2)
	}
}

func TestSaveIsDeterministic(t *testing.T) {
	a, b := restored(t).SaveAll(), restored(t).SaveAll()
	if a != b || !strings.HasPrefix(a, "*filter\n:INPUT ACCEPT [0:0]\n") {
		t.Errorf("saves differ or start oddly:\n%s\n---\n%s", a, b)
	}
}

func TestEnsureRulePrependsOnce(t *testing.T) {
	f := restored(t)
	for i := 0; i < 2; i++ {
		if err := f.EnsureRule("nat", "OUTPUT", "-j KUBE-SERVICES"); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.EnsureRule("nat", "OUTPUT", "-j KUBE-NOPE"); err == nil {
		t.Error("a jump to a missing chain was ensured")
	}
	nat, _ := f.Save("nat")
	if strings.Count(nat, "-A OUTPUT") != 1 {
		t.Errorf("want one OUTPUT rule:\n%s", nat)
	}
}

// Flush empties one table, user chains included, and leaves the others.
func TestFlushEmptiesOneTable(t *testing.T) {
	f := restored(t)
	filter := f.Ruleset().Save("filter")
	if err := f.Flush("nat"); err != nil {
		t.Fatal(err)
	}
	if got, want := f.Ruleset().Save("nat"), iptables.NewRuleset().Save("nat"); got != want {
		t.Errorf("nat after a flush:\n%s\nwant:\n%s", got, want)
	}
	if got := f.Ruleset().Save("filter"); got != filter {
		t.Errorf("flushing nat changed filter:\n%s", got)
	}
	if err := f.Flush("raw"); err == nil {
		t.Error("flushing a table that is not modelled succeeded")
	}
}
