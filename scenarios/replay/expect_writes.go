package replay

import (
	"fmt"
	"time"

	"github.com/proxysim/proxysim/scenarios"
)

func checkWritesExpectation(e *scenarios.WritesExpectation, r *Run) {
	we := e.Writes
	if we == nil {
		return
	}
	var in []time.Duration
	for _, at := range r.World().Writes(we.By) {
		if len(we.Between) == 2 && (at < we.Between[0].D() || at > we.Between[1].D()) {
			continue
		}
		in = append(in, at)
	}
	n := len(in)
	got := fmt.Sprintf("%d %v", n, in)
	if we.Count != nil && n != *we.Count {
		r.Fail(we.Src.At("count"), "writes.count", fmt.Sprint(*we.Count), got)
	}
	if we.AtLeast != nil && n < *we.AtLeast {
		r.Fail(we.Src.At("atLeast"), "writes.atLeast", fmt.Sprintf("at least %d", *we.AtLeast), got)
	}
	if we.AtMost != nil && n > *we.AtMost {
		r.Fail(we.Src.At("atMost"), "writes.atMost", fmt.Sprintf("at most %d", *we.AtMost), got)
	}
}
