package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/proxysim/proxysim/netns/doctor"
)

// doctorProbes is how `doctor` looks at the host; tests replace it.
var doctorProbes = doctor.Host

func newDoctor(stdout io.Writer) *cobra.Command {
	var require []string
	var format string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Say what this machine can drive, and how to install what is missing",
		Long: `doctor checks what each dataplane needs on this machine: root, the ip_vs
module (seen in a fresh network namespace), iptables' nft and legacy
backends, nft and the kernel kube-proxy's nftables mode needs (nft 1.0.1,
kernel 5.13), QEMU and the VM runner's tools, KVM (not needed: the VM runs
under QEMU's software emulation), and Chromium for the report page's browser
test. For each missing piece it prints the Debian/Ubuntu command that
installs it and why proxysim needs it, then which dataplanes and modes this
machine can replay on.

It changes nothing on the host (but for a network namespace it creates and
removes, as root). Exit code 0, whatever is missing, unless --require names
checks (or groups: iptables, nftables, vm, netns) that failed: then 3.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "json" {
				return fail(exitInvalid, fmt.Errorf("--format %q: want text or json", format))
			}
			checks := doctor.Diagnose(doctorProbes())
			failed, err := doctor.Require(checks, require)
			if err != nil {
				return fail(exitInvalid, err)
			}
			caps := doctor.Capabilities(checks)
			if format == "json" {
				b, _ := json.MarshalIndent(struct {
					Checks       []doctor.Check      `json:"checks"`
					Capabilities []doctor.Capability `json:"capabilities"`
				}{checks, caps}, "", "  ")
				fmt.Fprintf(stdout, "%s\n", b)
			} else {
				writeDiagnosis(stdout, checks, caps)
			}
			if len(failed) > 0 {
				var names []string
				for _, c := range failed {
					names = append(names, c.Name)
				}
				return fail(exitCannotRun, fmt.Errorf("required but missing: %s", strings.Join(names, ", ")))
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&require, "require", nil, "exit 3 unless these checks pass (comma-separated: "+strings.Join(doctor.Names, ", ")+"; or the groups iptables, nftables, vm, netns)")
	cmd.Flags().StringVar(&format, "format", "text", "text or json")
	return cmd
}

func writeDiagnosis(w io.Writer, checks []doctor.Check, caps []doctor.Capability) {
	fmt.Fprintln(w, "proxysim doctor: what this machine can drive")
	fmt.Fprintln(w)
	width := 0
	for _, c := range checks {
		width = max(width, len(c.Name))
	}
	for _, c := range checks {
		status := "ok"
		if !c.OK {
			status = "MISSING"
		}
		fmt.Fprintf(w, "  %-7s  %-*s  %s\n", status, width, c.Name, c.Found)
		indent := strings.Repeat(" ", 2+7+2+width+2)
		if !c.OK {
			fmt.Fprintf(w, "%sfor:     %s\n%swhy:     %s\n%sinstall: %s\n", indent, c.For, indent, c.Why, indent, c.Fix)
		} else if c.Note != "" {
			fmt.Fprintf(w, "%snote:    %s\n", indent, c.Note)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "this machine can replay on:")
	for _, c := range caps {
		if c.OK {
			fmt.Fprintf(w, "  yes  %s\n", c.What)
		} else {
			fmt.Fprintf(w, "  no   %s (missing: %s)\n", c.What, strings.Join(c.Missing, ", "))
		}
	}
}
