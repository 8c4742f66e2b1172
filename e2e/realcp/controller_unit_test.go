package realcp

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/proxysim/proxysim/e2e/transcript"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim/vclock"
)

// The controller stories' replay and slice comparison, without root.

func loadStory(t *testing.T, name string) (*scenarios.Scenario, *transcript.Transcript) {
	t.Helper()
	s, err := scenarios.LoadLibrary(name)
	if err != nil {
		t.Fatal(err)
	}
	s = withProxyZone(s, "node-a")
	tr, err := transcript.RecordWith(s, transcript.Options{Pods: true})
	if err != nil {
		t.Fatal(err)
	}
	return s, tr
}

// TestControllerStorySettings: the scenario's controller flags reach
// upstream's controller, kube-controller-manager's defaults otherwise; a
// story without the controller is replayed as its slice writes.
func TestControllerStorySettings(t *testing.T) {
	s, _ := loadStory(t, "iptables-rolling-update-controllers")
	set, err := controllerStory(s)
	if err != nil || set == nil {
		t.Fatalf("a controller story: %v %v", set, err)
	}
	if *set != (sliceSettings{BatchPeriod: time.Second, MaxEndpointsPerSlice: 100, Workers: 5}) {
		t.Errorf("settings %+v", *set)
	}
	plain, err := scenarios.LoadLibrary("iptables-traffic-policies")
	if err != nil {
		t.Fatal(err)
	}
	if set, err := controllerStory(plain); set != nil || err != nil {
		t.Errorf("a story without controllers: %+v %v", set, err)
	}
}

// TestControllerStorySteps: a controller story replays its Pod writes in
// place of proxysim's controller's slice writes, in the order they were
// made; the old replay keeps the slice writes and no Pods.
func TestControllerStorySteps(t *testing.T) {
	_, tr := loadStory(t, "iptables-rolling-update-controllers")
	steps, err := replaySteps(tr, true)
	if err != nil {
		t.Fatal(err)
	}
	var pods []string
	for _, st := range steps {
		switch {
		case st.Pod != nil:
			pods = append(pods, st.Pod.Op+"@"+st.At.String())
		case st.Action != nil && st.Action.Write != nil && st.Action.Write.Kind == "EndpointSlice":
			t.Errorf("%v: proxysim's controller's slice write replayed", st.At)
		}
	}
	// Three new pods, each made ready and an old one deleted gracefully
	// (two writes at each of 15.5, 15.7 and 15.9s), the old ones gone 30s
	// later.
	want := "add@10.5s add@10.5s add@10.5s update@15.5s update@15.5s update@15.7s update@15.7s update@15.9s update@15.9s delete@45.5s delete@45.7s delete@45.9s"
	if got := strings.Join(pods, " "); got != want {
		t.Errorf("Pod writes %s, want %s", got, want)
	}
	old, err := replaySteps(tr, false)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, st := range old {
		if st.Pod != nil {
			t.Errorf("%v: a Pod write in the old replay", st.At)
		}
		if st.Action != nil && st.Action.Write != nil {
			n++
		}
	}
	if n != 4 {
		t.Errorf("the old replay has %d slice writes, want proxysim's controller's 4", n)
	}
}

// TestWithProxyZone: the proxy's Node loses the zone the proxy does not
// have; the other Nodes and the scenario it came from keep theirs.
func TestWithProxyZone(t *testing.T) {
	s, err := scenarios.LoadLibrary("iptables-pod-label-change")
	if err != nil {
		t.Fatal(err)
	}
	zones := func(s *scenarios.Scenario) map[string]string {
		out := map[string]string{}
		for _, o := range s.Initial {
			if n, ok := o.Obj.(*v1.Node); ok {
				out[n.Name] = n.Labels[v1.LabelTopologyZone]
			}
		}
		return out
	}
	got := zones(withProxyZone(s, "node-a"))
	if got["node-a"] != "" || got["node-b"] != "zone-b" {
		t.Errorf("zones %v, want node-a none, node-b zone-b", got)
	}
	if z := zones(s)["node-a"]; z != "zone-a" {
		t.Errorf("the library's scenario changed: node-a zone %q", z)
	}
	zoned := *s
	zoned.Proxy.Zone = "zone-c"
	if z := zones(withProxyZone(&zoned, "node-a"))["node-a"]; z != "zone-c" {
		t.Errorf("a proxy in zone-c: its Node's zone %q", z)
	}
}

// TestStampsAreWholeSeconds: a Pod's virtual stamps land on the real clock
// at origin plus their offset, whole seconds as the API server keeps them.
func TestStampsAreWholeSeconds(t *testing.T) {
	m := stamps{origin: time.Date(2026, 11, 28, 12, 0, 7, 0, time.UTC)}
	st := v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.244.3.10", Conditions: []v1.PodCondition{
		{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(vclock.Epoch.Add(15 * time.Second))},
		{Type: v1.ContainersReady, Status: v1.ConditionTrue},
	}}
	got := m.podStatus(v1.PodStatus{QOSClass: v1.PodQOSBestEffort}, st)
	if want := m.origin.Add(15 * time.Second); !got.Conditions[0].LastTransitionTime.Time.Equal(want) {
		t.Errorf("Ready at %v, want %v", got.Conditions[0].LastTransitionTime, want)
	}
	if !got.Conditions[1].LastTransitionTime.IsZero() {
		t.Errorf("an unset stamp became %v", got.Conditions[1].LastTransitionTime)
	}
	if got.QOSClass != v1.PodQOSBestEffort || got.PodIP != "10.244.3.10" || got.Phase != v1.PodRunning {
		t.Errorf("status %+v", got)
	}
}

// TestSliceComparison: two API servers' slices agree when only their
// names, UIDs, versions and endpoint order differ; a condition, a missing
// write, a late write or a trigger time makes them differ.
func TestSliceComparison(t *testing.T) {
	_, tr := loadStory(t, "iptables-pod-label-change")
	m := stamps{origin: time.Date(2026, 11, 28, 12, 0, 7, 0, time.UTC)}
	pred := predictedSliceWrites(tr, m)
	if len(pred) != 2 {
		t.Fatalf("proxysim's controller wrote %d slices, want 2", len(pred))
	}
	// Upstream's side: the same writes under other names and UIDs,
	// endpoints in another order, 30 ms later.
	real := func(edit func(i int, s *discovery.EndpointSlice)) []sliceWrite {
		var out []sliceWrite
		for i, w := range tr.Writes {
			s := w.Obj.(*discovery.EndpointSlice).DeepCopy()
			s.Name, s.UID, s.ResourceVersion = "web-x7k2p", "3f1c", "812"
			s.OwnerReferences[0].UID = "9a0b"
			for j := range s.Endpoints {
				s.Endpoints[j].TargetRef.UID = "uid"
			}
			s.Endpoints[0], s.Endpoints[len(s.Endpoints)-1] = s.Endpoints[len(s.Endpoints)-1], s.Endpoints[0]
			if v, ok := s.Annotations[v1.EndpointsLastChangeTriggerTime]; ok {
				// The Service's creation, before kube-proxy started.
				at, _ := time.Parse(time.RFC3339, v)
				s.Annotations[v1.EndpointsLastChangeTriggerTime] = m.at(metav1.NewTime(at)).Add(-time.Minute).Format(time.RFC3339)
			}
			if edit != nil {
				edit(i, s)
			}
			sw := sliceWriteOf(w.At+30*time.Millisecond, w.Op, s)
			sw.Old = !sw.Trigger.IsZero() && !sw.Trigger.After(m.origin)
			out = append(out, sw)
		}
		return out
	}
	if diffs, jitter := compareSliceWrites(pred, real(nil), tolerance); len(diffs) > 0 || jitter != 30*time.Millisecond {
		t.Fatalf("the same writes differ (jitter %v):\n%s", jitter, strings.Join(diffs, "\n"))
	}
	realStarts := []time.Duration{-100 * time.Millisecond, 40 * time.Millisecond, 11040 * time.Millisecond}
	if diffs, _ := compareSliceStates(pred, tr.Syncs, real(nil), realStarts, tolerance); len(diffs) > 0 {
		t.Errorf("the same slices at each sync differ:\n%s", strings.Join(diffs, "\n"))
	}
	notReady := real(func(i int, s *discovery.EndpointSlice) {
		if i == 1 {
			f := false
			s.Endpoints[0].Conditions.Ready = &f
		}
	})
	if diffs, _ := compareSliceWrites(pred, notReady, tolerance); len(diffs) != 1 || !strings.Contains(diffs[0], "ready: false") {
		t.Errorf("a not-ready endpoint: %v", diffs)
	}
	if diffs, _ := compareSliceStates(pred, tr.Syncs, notReady, realStarts, tolerance); len(diffs) != 1 || !strings.HasPrefix(diffs[0], "sync 3:") {
		t.Errorf("a not-ready endpoint at the third sync: %v", diffs)
	}
	// A write seen 30 ms after the sync it asked for started: the race
	// is accepted; a second after, it is not.
	seenLate := []time.Duration{-100 * time.Millisecond, 0, 11 * time.Second}
	if diffs, raced := compareSliceStates(pred, tr.Syncs, real(nil), seenLate, tolerance); len(diffs) > 0 || len(raced) != 2 {
		t.Errorf("writes seen 30 ms after their syncs started: diffs %v, raced %v", diffs, raced)
	}
	if diffs, _ := compareSliceWrites(pred, real(nil)[:1], tolerance); len(diffs) != 1 || !strings.Contains(diffs[0], "wrote 2 times") {
		t.Errorf("a missing write: %v", diffs)
	}
	late := real(nil)
	late[1].At += time.Second
	if diffs, _ := compareSliceWrites(pred, late, tolerance); len(diffs) != 1 || !strings.Contains(diffs[0], "off by") {
		t.Errorf("a write a second late: %v", diffs)
	}
	if diffs, _ := compareSliceStates(pred, tr.Syncs, late, realStarts, tolerance); len(diffs) != 1 || !strings.HasPrefix(diffs[0], "sync 3:") {
		t.Errorf("the update a second after its sync: %v", diffs)
	}
	stamped := real(func(i int, s *discovery.EndpointSlice) {
		if i == 1 {
			s.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: m.origin.Add(10 * time.Second).Format(time.RFC3339)}
		}
	})
	if diffs, _ := compareSliceWrites(pred, stamped, tolerance); len(diffs) != 1 || !strings.Contains(diffs[0], "trigger time") {
		t.Errorf("a trigger time proxysim's controller did not write: %v", diffs)
	}
}

// TestSliceStatesInAnotherServiceOrder: upstream's workers write web-all's
// slice before web's at the same instant: the sync that started between
// the two writes started with web-all's, proxysim's with web's. Accepted
// (and logged) as the same instant's writes in another order; the same
// slice with another endpoint condition is not.
func TestSliceStatesInAnotherServiceOrder(t *testing.T) {
	_, tr := loadStory(t, "iptables-terminating-pod-publish-not-ready")
	m := stamps{origin: time.Date(2026, 11, 28, 12, 0, 7, 0, time.UTC)}
	pred := predictedSliceWrites(tr, m)
	if len(pred) != 8 || pred[0].Service != "default/web" || pred[1].Service != "default/web-all" {
		t.Fatalf("proxysim's controller's writes: %d, first for %s", len(pred), pred[0].Service)
	}
	swapped := slices.Clone(pred)
	for i := 0; i+1 < len(swapped); i += 2 {
		swapped[i], swapped[i+1] = swapped[i+1], swapped[i]
		swapped[i].At, swapped[i+1].At = pred[i].At+10*time.Millisecond, pred[i].At+20*time.Millisecond
	}
	// Each sync starts 5 ms after the write it follows.
	var starts []time.Duration
	for i, s := range tr.Syncs {
		if i == 0 {
			starts = append(starts, -100*time.Millisecond)
			continue
		}
		starts = append(starts, swapped[s.Heard-1].At+5*time.Millisecond)
	}
	diffs, raced := compareSliceStates(pred, tr.Syncs, swapped, starts, tolerance)
	if len(diffs) > 0 || len(raced) != 4 || !strings.Contains(raced[0], "another order") {
		t.Errorf("diffs %v, raced %v; want the four syncs between two writes of an instant accepted", diffs, raced)
	}
	wrong := slices.Clone(swapped)
	wrong[0].Slice = strings.Replace(wrong[0].Slice, "ready: true", "ready: false", 1)
	if diffs, _ := compareSliceStates(pred, tr.Syncs, wrong, starts, tolerance); len(diffs) == 0 {
		t.Error("web-all's slice with an endpoint not ready was accepted")
	}
}
