package replay

import (
	"testing"

	"github.com/proxysim/proxysim/scenarios"
)

func TestSummarizeReadsTheReplay(t *testing.T) {
	s, err := scenarios.LoadLibrary("rolling-update-batch-1s")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Replay(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sum := Summarize(res)
	if sum.Syncs != len(res.Runs) || sum.DataplaneOps == 0 || sum.Programming == 0 || sum.Programming != len(res.Programming) {
		t.Fatalf("summary %+v", sum)
	}
	var mx float64
	for _, p := range res.Programming {
		mx = max(mx, p.Value.Seconds())
	}
	if sum.Max.Seconds() != mx || sum.P50 <= 0 || sum.P50 > sum.P99 || len(sum.Failures) != 0 {
		t.Errorf("summary %+v, largest observation %vs", sum, mx)
	}
}
