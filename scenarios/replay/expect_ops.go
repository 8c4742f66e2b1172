package replay

import (
	"fmt"
	"sort"

	"github.com/proxysim/proxysim/scenarios"
)

func checkOpsExpectation(e *scenarios.OpsExpectation, r *Run) {
	c := e.DataplaneOps
	if c == nil {
		return
	}
	// The writes are recorded in time order: a window is two searches.
	at := r.r.dataplaneAt
	n := len(at)
	if len(c.Between) == 2 {
		from, to := c.Between[0].D(), c.Between[1].D()
		n = sort.Search(len(at), func(i int) bool { return at[i] > to }) - sort.Search(len(at), func(i int) bool { return at[i] >= from })
	}
	switch {
	case c.Count != nil && n != *c.Count:
		r.Fail(c.Src.At("count"), "dataplaneOps.count", fmt.Sprint(*c.Count), fmt.Sprint(n))
	case c.AtLeast != nil && n < *c.AtLeast:
		r.Fail(c.Src.At("atLeast"), "dataplaneOps.atLeast", fmt.Sprintf("at least %d", *c.AtLeast), fmt.Sprint(n))
	case c.AtMost != nil && n > *c.AtMost:
		r.Fail(c.Src.At("atMost"), "dataplaneOps.atMost", fmt.Sprintf("at most %d", *c.AtMost), fmt.Sprint(n))
	}
}
