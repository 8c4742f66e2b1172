package sweep

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// columns are the table's columns after the point's index and values.
var columns = []string{"syncs", "dataplaneOps", "samples", "p50", "p99", "max", "sync p50", "sync p99", "sync max", "sync cpu-s/h", "full", "partial", "failed", "first failure"}

// clusterColumns follow columns in a sweep of a cluster scenario: its
// points' ClusterResult.
var clusterColumns = []string{"nodes", "sli p50", "sli p90", "sli p99", "pod p99", "node cpu-s/h", "worst node cpu-s/h"}

// isCluster says whether the report is a cluster scenario's: any point
// that ran has cluster figures.
func (r *Report) isCluster() bool {
	return slices.ContainsFunc(r.Results, func(res Result) bool { return res.Cluster != nil })
}

// rows is the table: a header, then a row per point run.
func (r *Report) rows() [][]string {
	head := []string{"point"}
	for _, a := range r.Axes {
		head = append(head, a.Key)
	}
	head = append(head, columns...)
	cluster := r.isCluster()
	if cluster {
		head = append(head, clusterColumns...)
	}
	out := [][]string{head}
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
		if cluster {
			if c := res.Cluster; c != nil {
				row = append(row, fmt.Sprint(c.Nodes), c.SLIPerc50.String(), c.SLIPerc90.String(), c.SLIPerc99.String(), c.PodP99.String(),
					strconv.FormatFloat(c.NodeCPU, 'f', -1, 64), strconv.FormatFloat(c.WorstNodeCPU, 'f', -1, 64))
			} else {
				row = append(row, "-", "-", "-", "-", "-", "-", "-")
			}
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

// ReadCSV reads a table CSV wrote back into a report of scenario (which
// the table does not name), so a committed table can be drawn again
// without replaying it; name is for messages. The table must hold every
// point of its axes, in order, with the columns CSV writes today.
func ReadCSV(name, scenario string, data []byte) (*Report, error) {
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if len(rows) < 2 {
		return nil, fmt.Errorf("%s: no rows", name)
	}
	head := rows[0]
	want := columns
	if len(head) > len(clusterColumns) && slices.Equal(head[len(head)-len(clusterColumns):], clusterColumns) {
		want = slices.Concat(columns, clusterColumns)
	}
	naxes := len(head) - 1 - len(want)
	if naxes < 1 || head[0] != "point" || !slices.Equal(head[1+naxes:], want) {
		return nil, fmt.Errorf("%s:1: header %q: want point, the axes, then %s (and, for a cluster, %s)", name, strings.Join(head, ","), strings.Join(columns, ","), strings.Join(clusterColumns, ","))
	}
	r := &Report{Format: FormatVersion, Scenario: scenario}
	for _, key := range head[1 : 1+naxes] {
		var vals []string
		for _, row := range rows[1:] {
			if v := row[len(r.Axes)+1]; !slices.Contains(vals, v) {
				vals = append(vals, v)
			}
		}
		r.Axes = append(r.Axes, Axis{Key: key, Values: vals})
	}
	r.Points = Points(r.Axes)
	if len(r.Points) != len(rows)-1 {
		return nil, fmt.Errorf("%s: %d rows, but its axes make %d points", name, len(rows)-1, len(r.Points))
	}
	for i, row := range rows[1:] {
		line := i + 2
		if row[0] != fmt.Sprint(i) || !slices.Equal(row[1:1+naxes], r.Points[i].Values) {
			return nil, fmt.Errorf("%s:%d: point %s (%s) is not its axes' point %d", name, line, row[0], strings.Join(row[1:1+naxes], ","), i)
		}
		res, err := readRow(row[1+naxes : 1+naxes+len(columns)])
		if err == nil && len(want) > len(columns) {
			res.Cluster, err = readClusterCells(row[1+naxes+len(columns):])
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, line, err)
		}
		res.Point = i
		r.Ran = append(r.Ran, i)
		r.Results = append(r.Results, res)
	}
	return r, nil
}

// readRow reads a row's columns (after the point and its values).
func readRow(cells []string) (Result, error) {
	var res Result
	if last := cells[len(cells)-1]; cells[0] == "-" && strings.HasPrefix(last, "error: ") {
		res.Error = strings.TrimPrefix(last, "error: ")
		return res, nil
	}
	var err error
	count := func(i int, to *int) {
		if err == nil {
			if *to, err = strconv.Atoi(cells[i]); err != nil {
				err = fmt.Errorf("%s: %q is not a count", columns[i], cells[i])
			}
		}
	}
	dur := func(i int, to *Duration) {
		if err == nil && cells[i] != "-" {
			d, e := time.ParseDuration(cells[i])
			if e != nil {
				err = fmt.Errorf("%s: %q is not a duration", columns[i], cells[i])
			}
			*to = Duration(d)
		}
	}
	count(0, &res.Syncs)
	count(1, &res.DataplaneOps)
	count(2, &res.Samples)
	dur(3, &res.P50)
	dur(4, &res.P99)
	dur(5, &res.Max)
	dur(6, &res.SyncP50)
	dur(7, &res.SyncP99)
	dur(8, &res.SyncMax)
	if err == nil {
		if res.SyncCPUPerHour, err = strconv.ParseFloat(cells[9], 64); err != nil {
			err = fmt.Errorf("%s: %q is not a number", columns[9], cells[9])
		}
	}
	count(10, &res.FullSyncs)
	count(11, &res.PartialSyncs)
	count(12, &res.Failed)
	res.FirstFailure = cells[13]
	return res, err
}

// readClusterCells reads a row's cluster columns; nil when the point has
// none ("-").
func readClusterCells(cells []string) (*ClusterResult, error) {
	if cells[0] == "-" {
		return nil, nil
	}
	c := &ClusterResult{}
	var err error
	if c.Nodes, err = strconv.Atoi(cells[0]); err != nil {
		return nil, fmt.Errorf("%s: %q is not a count", clusterColumns[0], cells[0])
	}
	for i, to := range []*Duration{&c.SLIPerc50, &c.SLIPerc90, &c.SLIPerc99, &c.PodP99} {
		d, err := time.ParseDuration(cells[1+i])
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a duration", clusterColumns[1+i], cells[1+i])
		}
		*to = Duration(d)
	}
	for i, to := range []*float64{&c.NodeCPU, &c.WorstNodeCPU} {
		if *to, err = strconv.ParseFloat(cells[5+i], 64); err != nil {
			return nil, fmt.Errorf("%s: %q is not a number", clusterColumns[5+i], cells[5+i])
		}
	}
	return c, nil
}
