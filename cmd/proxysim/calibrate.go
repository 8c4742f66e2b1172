package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/proxysim/proxysim/netns/calibrate"
)

func newCalibrate(stdout, stderr io.Writer) *cobra.Command {
	var quick bool
	var out, svg, name string
	var dataplanes []string
	var repeats int
	var shapes []string
	var maxSelfError float64
	cmd := &cobra.Command{
		Use:   "calibrate",
		Short: "Measure a cost profile on this machine (root)",
		Long: `calibrate measures how long syncs take on this machine's kernel: generated
clusters from 100 to 20,000 Services (1 to 50 endpoints each) are programmed
into real tables in throwaway network namespaces, by proxysim's proxiers over
the code --dataplane netns uses, through iptables' nft and legacy backends
and nftables. For each cluster: a full sync into an empty table (a new node),
a partial sync after one endpoint changes, one after one Service changes, and
a full sync over the table left (a restart); every sync's listing is timed
apart. Each is repeated; it prints a table (median, min, max), fits a curve
per dataplane and kind (docs/cost-profiles.md), and writes the profile
(JSON, for syncCost: {profile: FILE}) and an SVG of the curves over the
points. IPVS is refused: this host has no ip_vs, and the VM's kernel is an
emulator's, whose timings say nothing about a node.

--quick measures fewer, smaller clusters, three times each (CI: under 2 minutes);
--max-self-error fails (exit 1) when the profile's median error on its own
points exceeds it for any dataplane and kind.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o := calibrate.Default()
			if quick {
				o = calibrate.Quick()
			}
			if len(shapes) > 0 {
				o.Shapes = nil
				for _, sh := range shapes {
					var svc, eps int
					if _, err := fmt.Sscanf(sh, "%dx%d", &svc, &eps); err != nil || svc < 1 || eps < 1 {
						return fail(exitInvalid, fmt.Errorf("--shapes %q: want SERVICESxENDPOINTS, e.g. 1000x10", sh))
					}
					o.Shapes = append(o.Shapes, calibrate.Shape{Services: svc, EndpointsPerService: eps})
				}
			}
			if repeats > 0 {
				o.Repeats = repeats
			}
			o.Dataplanes, o.Name, o.Progress = dataplanes, name, stderr
			res, err := calibrate.Run(o)
			if err != nil {
				return fail(exitCannotRun, err)
			}
			calibrate.WriteTable(stdout, res)
			fmt.Fprintln(stdout)
			self := calibrate.SelfError(res.Profile, res.Samples)
			calibrate.Summary(stdout, res.Profile, self)
			b, err := res.Profile.Marshal()
			if err != nil {
				return err
			}
			if err := os.WriteFile(out, b, 0o644); err != nil {
				return err
			}
			if svg != "" {
				if err := os.WriteFile(svg, res.Profile.SVG(), 0o644); err != nil {
					return err
				}
			}
			fmt.Fprintf(stdout, "\nwrote %s (and %s); measured in %s\n", out, svg, res.Elapsed.Round(time.Second))
			if maxSelfError > 0 {
				var bad []string
				for d, byKind := range self {
					for k, e := range byKind {
						if e > maxSelfError {
							bad = append(bad, fmt.Sprintf("%s %s %.1f%%", d, k, 100*e))
						}
					}
				}
				if len(bad) > 0 {
					return fail(exitFail, fmt.Errorf("the profile misses its own points by more than %.0f%%: %s", 100*maxSelfError, strings.Join(bad, ", ")))
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&quick, "quick", false, "fewer, smaller clusters, three times each (CI)")
	f.StringVarP(&out, "output", "o", "profile.json", "the profile file to write")
	f.StringVar(&svg, "svg", "profile.svg", "the plot to write (empty: none)")
	f.StringVar(&name, "name", "calibrated", "the profile's name")
	f.StringSliceVar(&dataplanes, "dataplane", nil, "dataplanes to measure: iptables-nft, iptables-legacy, nftables (default all three)")
	f.StringSliceVar(&shapes, "shapes", nil, "clusters to measure, SERVICESxENDPOINTS each (default: calibrate's own list)")
	f.IntVar(&repeats, "repeats", 0, "how many times each point is measured (default 3)")
	f.Float64Var(&maxSelfError, "max-self-error", 0, "fail when the profile's median relative error on its own points exceeds this (0.25 = 25%)")
	return cmd
}
