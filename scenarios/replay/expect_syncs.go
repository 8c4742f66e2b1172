package replay

import (
	"fmt"
	"strings"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim"
)

func checkSyncsExpectation(e *scenarios.SyncsExpectation, r *Run) {
	sy := e.Syncs
	if sy == nil {
		return
	}
	runs := r.World().SyncsView()
	if len(sy.Between) == 2 {
		var in []sim.SyncRecord
		for _, run := range runs {
			if run.Start >= sy.Between[0].D() && run.Start <= sy.Between[1].D() {
				in = append(in, run)
			}
		}
		runs = in
	}
	n := len(runs)
	if sy.Count != nil && n != *sy.Count {
		r.Fail(sy.Src.At("count"), "syncs.count", fmt.Sprint(*sy.Count), fmt.Sprintf("%d (%s)", n, startList(runs)))
	}
	if sy.AtLeast != nil && n < *sy.AtLeast {
		r.Fail(sy.Src.At("atLeast"), "syncs.atLeast", fmt.Sprintf("at least %d", *sy.AtLeast), fmt.Sprintf("%d (%s)", n, startList(runs)))
	}
	if sy.AtMost != nil && n > *sy.AtMost {
		r.Fail(sy.Src.At("atMost"), "syncs.atMost", fmt.Sprintf("at most %d", *sy.AtMost), fmt.Sprintf("%d (%s)", n, startList(runs)))
	}
	if sy.At != nil {
		want := make([]string, len(sy.At))
		for i, d := range sy.At {
			want[i] = d.String()
		}
		if got := startList(runs); got != "["+strings.Join(want, " ")+"]" {
			r.Fail(sy.Src.At("at"), "syncs.at", "["+strings.Join(want, " ")+"]", got)
		}
	}
}

func startList(runs []sim.SyncRecord) string {
	s := make([]string, len(runs))
	for i, r := range runs {
		s[i] = r.Start.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}
