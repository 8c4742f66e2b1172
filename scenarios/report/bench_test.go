package report

import (
	"bytes"
	"testing"

	"github.com/proxysim/proxysim/scenarios/replay"
)

// BenchmarkPageHourOfChurn writes the page of one virtual hour of churn
// at 10 changes a second (hourOfChurn), replayed once beforehand; it
// reports the page's size and the events it holds.
func BenchmarkPageHourOfChurn(b *testing.B) {
	for _, mode := range []string{"ipvs", "iptables"} {
		b.Run(mode, func(b *testing.B) {
			tl, _, err := Replay(hourOfChurn(b, mode), replay.Options{})
			if err != nil {
				b.Fatal(err)
			}
			var page bytes.Buffer
			for b.Loop() {
				page.Reset()
				if err := Write(&page, tl, Config{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(page.Len()), "page-bytes")
			b.ReportMetric(float64(tl.Events), "trace-events")
		})
	}
}

// BenchmarkReportHourOfChurn is what `proxysim report` does for that
// hour: the replay, followed for the page, and the page.
func BenchmarkReportHourOfChurn(b *testing.B) {
	s := hourOfChurn(b, "ipvs")
	var page bytes.Buffer
	for b.Loop() {
		tl, _, err := Replay(s, replay.Options{})
		if err != nil {
			b.Fatal(err)
		}
		page.Reset()
		if err := Write(&page, tl, Config{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(page.Len()), "page-bytes")
}
