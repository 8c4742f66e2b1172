package sweep

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
)

// columns are the table's columns after the point's index and values.
var columns = []string{"syncs", "dataplaneOps", "samples", "p50", "p99", "max", "sync p50", "sync p99", "sync max", "sync cpu-s/h", "full", "partial", "failed", "first failure"}

// rows is the table: a header, then a row per point run.
func (r *Report) rows() [][]string {
	head := []string{"point"}
	for _, a := range r.Axes {
		head = append(head, a.Key)
	}
	out := [][]string{append(head, columns...)}
	for _, res := range r.Results {
		row := []string{fmt.Sprint(res.Point)}
		row = append(row, r.Points[res.Point].Values...)
		if res.Error != "" {
			row = append(row, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "error: "+res.Error)
		} else {
			// Without observations there is no latency to show.
			p50, p99, mx := "-", "-", "-"
			if res.Samples > 0 {
				p50, p99, mx = res.P50.String(), res.P99.String(), res.Max.String()
			}
			row = append(row, fmt.Sprint(res.Syncs), fmt.Sprint(res.DataplaneOps), fmt.Sprint(res.Samples),
				p50, p99, mx, res.SyncP50.String(), res.SyncP99.String(), res.SyncMax.String(),
				strconv.FormatFloat(res.SyncCPUPerHour, 'f', -1, 64), fmt.Sprint(res.FullSyncs), fmt.Sprint(res.PartialSyncs),
				fmt.Sprint(res.Failed), res.FirstFailure)
		}
		out = append(out, row)
	}
	return out
}

// Text is the table with aligned columns, under a line naming the
// scenario (and the shard).
func (r *Report) Text() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "sweep %s: %d points", r.Scenario, len(r.Points))
	if r.Shard != "" {
		fmt.Fprintf(&b, ", shard %s ran %d", r.Shard, len(r.Ran))
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, row := range r.rows() {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
	// tabwriter pads the last column's cells when some are empty.
	lines := strings.Split(b.String(), "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	return []byte(strings.Join(lines, "\n"))
}

// CSV is the table as comma-separated values, a header first.
func (r *Report) CSV() []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.WriteAll(r.rows()) // a bytes.Buffer cannot fail
	return b.Bytes()
}
