package migrate

import (
	"strings"
	"testing"
)

// The kernel check's own logic on the fake dataplanes (a kernel's stand-in
// whose routes are the tracers'): it measures the sides whose mode the
// dataplane replays, names the other, and its crossed twin fails every
// connection it measures. The real kernels run the same code in the
// privileged suites (e2e: host-kernel for iptables and nftables, kernel in
// the VM for ipvs).
func TestKernelCheckMeasuresTheSidesItsKernelReplays(t *testing.T) {
	story := "stories/external-traffic-policy-local/"
	for _, tc := range []struct {
		name, to string
		modes    []string
		measured string // the mode of every kernel line
		note     []string
	}{
		{"vm", "nftables", VMKernelModes, "ipvs", []string{"on the ipvs (before) side only (masquerade measured too)", "the nftables (after) side is not checked on a kernel: it needs --dataplane netns"}},
		{"host", "nftables", nil, "nftables", []string{"on the nftables (after) side only (masquerade not measured)", "the ipvs (before) side is not checked on a kernel: it needs --dataplane vm"}},
		{"vm onto iptables", "iptables", VMKernelModes, "ipvs", []string{"on the ipvs (before) side only", "the iptables (after) side is not checked on a kernel: it needs --dataplane netns"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Compare(Options{Cluster: story + "cluster.yaml", Config: story + "kube-proxy.yaml", To: tc.to, KernelModes: tc.modes})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.CheckKernel(nil, false); err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			_ = r.Text(&text)
			lines := 0
			for _, s := range r.Services {
				for _, d := range s.Differences {
					for _, k := range d.Kernel {
						lines++
						if !strings.HasPrefix(k, tc.measured+" on ") || !strings.HasSuffix(k, ": as predicted") {
							t.Errorf("kernel line %q: want %s's, as predicted\n%s", k, tc.measured, text.String())
						}
					}
				}
			}
			if lines == 0 || r.KernelChecked != lines || r.KernelFailures != 0 {
				t.Fatalf("%d lines, %d checked, %d failures\n%s", lines, r.KernelChecked, r.KernelFailures, text.String())
			}
			for _, n := range tc.note {
				if !strings.Contains(r.KernelNote, n) {
					t.Errorf("note %q lacks %q", r.KernelNote, n)
				}
			}
			if err := r.CheckKernel(nil, true); err != nil {
				t.Fatal(err)
			}
			if tc.measured != "ipvs" {
				// masquerade is not measured there: the differences in
				// masquerade alone pass crossed; the others must fail
				if r.KernelFailures == 0 {
					t.Fatalf("crossed, nothing failed")
				}
				return
			}
			if r.KernelFailures != r.KernelChecked {
				text.Reset()
				_ = r.Text(&text)
				t.Fatalf("crossed: %d of %d failed, want all\n%s", r.KernelFailures, r.KernelChecked, text.String())
			}
		})
	}
}

// On the ipvs side the predicted masquerade is part of what is checked:
// the node's own connection to the NodePort reaches the same endpoint in
// both modes, masqueraded after only, so asking the ipvs side for the
// other mode's outcome fails on masquerade alone.
func TestKernelCheckHoldsTheIPVSSideToItsMasquerade(t *testing.T) {
	story := "stories/external-traffic-policy-local/"
	r, err := Compare(Options{Cluster: story + "cluster.yaml", Config: story + "kube-proxy.yaml", To: "nftables", KernelModes: VMKernelModes})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CheckKernel(nil, true); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range r.Services {
		for _, d := range s.Differences {
			if d.Entry != "NodePort" || d.Client != "the node itself" {
				continue
			}
			found = true
			for _, k := range d.Kernel {
				if !strings.Contains(k, "NOT as predicted") || !strings.Contains(k, "masqueraded {}") {
					t.Errorf("kernel line %q: want a failure on masquerade", k)
				}
			}
		}
	}
	if !found {
		t.Fatal("no NodePort difference from the node itself")
	}
}

// Neither side replayed: nothing measured, both sides named.
func TestKernelCheckNamesBothSidesItCannotReplay(t *testing.T) {
	story := "stories/external-traffic-policy-local/"
	r, err := Compare(Options{Cluster: story + "cluster.yaml", Config: story + "kube-proxy.yaml", To: "nftables", KernelModes: []string{"iptables"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CheckKernel(nil, false); err != nil {
		t.Fatal(err)
	}
	want := "not checked on a kernel: the ipvs (before) side needs --dataplane vm; the nftables (after) side needs --dataplane netns"
	if r.KernelNote != want || r.KernelChecked != 0 {
		t.Fatalf("note %q, %d checked; want %q", r.KernelNote, r.KernelChecked, want)
	}
}

// A kernel check made by another process (the migrate inside the VM) is
// taken by a report of the same comparison whole, exit code included, and
// refused, nothing taken, when its differences are not the report's.
func TestKernelResultCrossesToAnotherReport(t *testing.T) {
	story := "stories/external-traffic-policy-local/"
	o := Options{Cluster: story + "cluster.yaml", Config: story + "kube-proxy.yaml", To: "nftables", KernelModes: VMKernelModes}
	checked, err := Compare(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := checked.CheckKernel(nil, true); err != nil { // failures: the exit code must follow
		t.Fatal(err)
	}
	checked.finish()
	k := checked.KernelResult()
	host, err := Compare(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := host.SetKernelResult(k); err != nil {
		t.Fatal(err)
	}
	var a, b strings.Builder
	_ = checked.Text(&a)
	_ = host.Text(&b)
	if a.String() != b.String() || host.Exit != ExitKernel {
		t.Fatalf("exit %d; the report given the kernel check:\n%s\nwant:\n%s", host.Exit, b.String(), a.String())
	}
	fresh, err := Compare(o)
	if err != nil {
		t.Fatal(err)
	}
	k.Differences[1].Key = "default/other | https | NodePort | off-cluster"
	if err := fresh.SetKernelResult(k); err == nil || !strings.Contains(err.Error(), "not the report's") || fresh.KernelNote != "" || fresh.Exit == ExitKernel {
		t.Fatalf("a mismatched kernel check: err %v, note %q, exit %d", err, fresh.KernelNote, fresh.Exit)
	}
	k = checked.KernelResult()
	k.Differences = k.Differences[:len(k.Differences)-1]
	if err := fresh.SetKernelResult(k); err == nil {
		t.Fatal("a kernel check with a difference less was taken")
	}
}
