package realcp

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/proxysim/proxysim/e2e/transcript"
	"github.com/proxysim/proxysim/scenarios"
)

// TestFlushStepsAreReplayed: iptables-canary-flush's two iptablesFlush
// steps reach the real replay at their instants, with the tables each
// empties, merged with the script in time order.
func TestFlushStepsAreReplayed(t *testing.T) {
	s, err := scenarios.LoadLibrary("iptables-canary-flush")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transcript.Record(s)
	if err != nil {
		t.Fatal(err)
	}
	steps, err := replaySteps(tr, false)
	if err != nil {
		t.Fatal(err)
	}
	var flushes []replayStep
	for i, st := range steps {
		if i > 0 && st.At < steps[i-1].At {
			t.Errorf("step %d at %v comes after one at %v", i, st.At, steps[i-1].At)
		}
		if st.Flush != nil {
			flushes = append(flushes, st)
		}
	}
	want := []replayStep{
		{At: 40 * time.Second, Flush: []string{"mangle", "nat", "filter"}},
		{At: 70 * time.Second, Flush: []string{"mangle"}},
	}
	if len(flushes) != len(want) {
		t.Fatalf("flushes %+v, want %+v", flushes, want)
	}
	for i := range want {
		if flushes[i].At != want[i].At || !slices.Equal(flushes[i].Flush, want[i].Flush) {
			t.Errorf("flush %d: %+v, want %+v", i, flushes[i], want[i])
		}
	}
	tr.Steps = append(tr.Steps, transcript.Step{At: time.Second, Op: "iptablesFlush", Detail: "iptables -t nat -Z (operator)"})
	if _, err := replaySteps(tr, false); err == nil {
		t.Error("a flush command the replay cannot read was accepted")
	}
}

// TestCanaryLoggerNotesTheFilterCanary: the iptables wrapper notes the
// monitor's creation of its filter canary, as kube-proxy runs it, and
// nothing else; it runs the real command either way.
func TestCanaryLoggerNotesTheFilterCanary(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, canaryFile)
	script := filepath.Join(dir, "iptables")
	if err := os.WriteFile(script, []byte(canaryLogger(log, "echo ran")), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-w", "5", "-N", "KUBE-PROXY-CANARY", "-t", "mangle"},
		{"-w", "5", "-N", "KUBE-PROXY-CANARY", "-t", "filter"}, // noted
		{"-w", "5", "-N", "KUBE-SERVICES", "-t", "filter"},
		{"-w", "5", "-S", "KUBE-PROXY-CANARY", "-t", "filter"},
	} {
		out, err := exec.Command(script, args...).Output()
		if err != nil || string(out) == "" {
			t.Fatalf("%v: %q %v", args, out, err)
		}
	}
	kp := &kubeProxy{dir: dir}
	at, err := kp.canaryEnsured()
	if err != nil {
		t.Fatal(err)
	}
	if len(at) != 1 || time.Since(at[0]) > time.Minute || time.Since(at[0]) < 0 {
		t.Fatalf("noted %v, want one instant of now", at)
	}
}
