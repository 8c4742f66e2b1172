package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/proxysim/proxysim/netns/vm"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/migrate"
	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/costprofile"
)

// newMigrate is `proxysim migrate`: what changes for each Service when
// kube-proxy moves to another mode, from a cluster dump and its kube-proxy
// configuration.
func newMigrate(stdout, stderr io.Writer) *cobra.Command {
	var o migrate.Options
	var sets []string
	var format, html, dataplane, profile string
	var vmResult bool
	cmd := &cobra.Command{
		Use:   "migrate --cluster DUMP --config KUBE-PROXY-CONFIG --to MODE",
		Short: "Compare every Service's connections between kube-proxy's current mode and another, and check the nodes for it",
		Long: `migrate replays every node's kube-proxy in the mode of the configuration
(a KubeProxyConfiguration, or the kube-proxy ConfigMap) and in the target
mode (--to), over the cluster dump ('kubectl get nodes,svc,endpointslices,pods
-A -o yaml'), and traces each Service port from each entry point (ClusterIP,
NodePort on each node address and on 127.0.0.1, LoadBalancer IP, external
IP) and each client (a pod on the same node, a pod on another node, the node
itself, off the cluster): which endpoints with what shares, drop, reject or
no answer, and whether the source is masqueraded. Every difference is listed
with the kube-proxy rule behind it and its upstream source. The Nodes are
checked for what the target needs (nftables: kernel 5.13 and an nft of at
least 1.0.1 by OS image).

The target runs with the current configuration, its mode changed and
kube-proxy's defaults for the new mode applied (nftables: node ports on the
primary node IP only), or with --target-config; --set proxy.X=V changes a
target setting as in a scenario.

Exit codes: 0 every Service unchanged and every node ready, 1 some Service
changes, 2 invalid input (nothing compared), 3 a replay could not run,
4 an internal error, 5 some node cannot run the target mode (wins over 1),
6 with --dataplane netns or vm, the kernel routed a connection other than
predicted (wins over all).

--dataplane netns (root) replays the nodes on this kernel, in throwaway
network namespaces, with a route expectation per affected connection in
each mode, and measures them with real connections: each difference then
lists what the kernel did. Only the iptables and nftables sides run there.
--dataplane vm does the same for the ipvs side, in Debian's kernel under
QEMU (the whole IPVS packet path, masquerade measured too; slow: software
emulation); 'proxysim doctor' says whether this machine can run the VM.
The report names each side it did not check.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, s := range sets {
				path, value, ok := strings.Cut(s, "=")
				if !ok || !strings.HasPrefix(path, "proxy.") || path == "proxy." {
					return fail(exitInvalid, fmt.Errorf("--set %q: want proxy.FIELD=VALUE, such as proxy.nodePortAddresses=primary", s))
				}
				o.Set = append(o.Set, scenarios.Setting{Path: path, Value: value})
			}
			if format != "text" && format != "json" {
				return fail(exitInvalid, fmt.Errorf("--format %q: want text or json", format))
			}
			switch dataplane {
			case "fake":
			case "netns":
				o.KernelCheck = netnsDataplane
				if vmResult {
					o.KernelModes = migrate.VMKernelModes
				}
			case "vm":
				// Before anything runs: a machine that cannot boot the VM
				// is told what it lacks.
				if err := vm.CheckHost(); err != nil {
					return fail(exitCannotRun, fmt.Errorf("--dataplane vm: %w", err))
				}
				o.KernelModes = migrate.VMKernelModes
			default:
				return fail(exitInvalid, fmt.Errorf("--dataplane %q: want fake, netns to measure the iptables and nftables sides' differences on this kernel, or vm to measure the ipvs side's in the VM", dataplane))
			}
			if profile != "" {
				costs, err := migrateCosts(profile)
				if err != nil {
					return fail(exitInvalid, fmt.Errorf("--cost-profile: %w", err))
				}
				o.Costs = costs
			}
			r, err := migrate.Compare(o)
			if err != nil {
				return fail(exitInvalid, err)
			}
			if vmResult {
				b, err := json.Marshal(r.KernelResult())
				if err != nil {
					return fail(exitInternal, err)
				}
				fmt.Fprintf(stdout, "%s%s\n", migrateResultMarker, b)
				return nil
			}
			if dataplane == "vm" {
				if err := migrateInVM(cmd.Context(), o, sets, r, stderr); err != nil {
					return err
				}
			}
			if html != "" {
				var b bytes.Buffer
				if err := r.HTML(&b); err != nil {
					return fail(exitCannotRun, err)
				}
				if err := os.WriteFile(html, b.Bytes(), 0o644); err != nil {
					return fail(exitCannotRun, err)
				}
				fmt.Fprintf(stderr, "wrote %s\n", html)
			}
			if format == "json" {
				err = r.JSON(stdout)
			} else {
				err = r.Text(stdout)
			}
			if err != nil {
				return fail(exitCannotRun, err)
			}
			if r.Exit != 0 {
				return fail(r.Exit, nil)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Cluster, "cluster", "", "the cluster dump: kubectl get nodes,svc,endpointslices,pods -A -o yaml (or -o json)")
	cmd.Flags().StringVar(&o.Config, "config", "", "kube-proxy's configuration in use: a KubeProxyConfiguration file or the kube-proxy ConfigMap")
	cmd.Flags().StringVar(&o.To, "to", "", "the target mode: "+strings.Join(migrate.Modes, ", "))
	cmd.Flags().StringVar(&o.TargetConfig, "target-config", "", "the kube-proxy configuration the target will run with (its mode must be --to); default: the current one in the target mode")
	cmd.Flags().StringArrayVar(&sets, "set", nil, "proxy.FIELD=VALUE: a setting of the target's proxy, as in a scenario (repeat for more)")
	cmd.Flags().StringSliceVar(&o.Nodes, "node", nil, "compare these nodes only (default: every Node of the dump)")
	cmd.Flags().StringVar(&format, "format", "text", "text or json")
	cmd.Flags().StringVar(&dataplane, "dataplane", "fake", "fake; netns: also measure each difference with real connections on this kernel, on its iptables and nftables sides (root); vm: the same on its ipvs side, in Debian's kernel under QEMU")
	cmd.Flags().BoolVar(&vmResult, "vm-result", false, "print the kernel check as one marked line (for the migrate inside the VM)")
	_ = cmd.Flags().MarkHidden("vm-result")
	cmd.Flags().StringVar(&profile, "cost-profile", "default", "a cost profile (a built-in name, or a .json file from proxysim calibrate) to compare the initial sync's duration on each node; \"\" for none")
	cmd.Flags().StringVar(&html, "html", "", "also write the report as a self-contained HTML page to this file")
	for _, f := range []string{"cluster", "config", "to"} {
		_ = cmd.MarkFlagRequired(f)
	}
	return cmd
}

// migrateCosts are a cost profile's parts by mode: the iptables mode's
// through its nf_tables backend, as kube-proxy's image runs it by default.
func migrateCosts(name string) (map[string]sim.WorkCost, error) {
	var p *costprofile.Profile
	var err error
	if strings.HasSuffix(name, ".json") {
		p, err = costprofile.Load(name)
	} else {
		p, err = costprofile.Named(name)
	}
	if err != nil {
		return nil, err
	}
	costs := map[string]sim.WorkCost{}
	for mode, part := range map[string]string{"iptables": "iptables-nft", "nftables": "nftables", "ipvs": "ipvs"} {
		if m, err := p.Mode(part); err == nil {
			costs[mode] = m
		}
	}
	return costs, nil
}

// migrateResultMarker starts the console line that carries the kernel
// check made inside the VM.
const migrateResultMarker = "PROXYSIM-MIGRATE-KERNEL "

// migrateInVM checks the report's ipvs side on the VM's kernel: this very
// binary runs inside it as `migrate --dataplane netns` over copies of the
// inputs, compares again (the same report: the comparison is
// deterministic), measures the differences on the ipvs side and hands its
// kernel check back on a marked console line, which r takes. Without an
// ipvs side or a difference there is nothing to measure, and no boot.
func migrateInVM(ctx context.Context, o migrate.Options, sets []string, r *migrate.Report, stderr io.Writer) error {
	differences := 0
	for _, s := range r.Services {
		differences += len(s.Differences)
	}
	if r.From != "ipvs" && r.To != "ipvs" || differences == 0 {
		if err := r.CheckKernel(nil, false); err != nil { // names the sides, replays nothing
			return fail(exitCannotRun, err)
		}
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return fail(exitCannotRun, err)
	}
	var files vm.Files
	inner := []string{"migrate", "--dataplane", "netns", "--vm-result", "--cost-profile=", "--to", o.To}
	for _, f := range [][2]string{{"--cluster", o.Cluster}, {"--config", o.Config}, {"--target-config", o.TargetConfig}} {
		if f[1] == "" {
			continue
		}
		g, err := files.AddFile(f[1])
		if err != nil {
			return fail(exitCannotRun, err)
		}
		inner = append(inner, f[0], g)
	}
	for _, s := range sets {
		inner = append(inner, "--set", s)
	}
	for _, n := range o.Nodes {
		inner = append(inner, "--node", n)
	}
	ctx, stop := interruptible(ctx)
	defer stop()
	console := &markedLine{marker: migrateResultMarker, w: stderr}
	res, err := vm.Run(ctx, vm.Config{Console: console}, self, inner, &files)
	if err != nil {
		return fail(exitCannotRun, fmt.Errorf("--dataplane vm: %w (the proxysim binary must be static: CGO_ENABLED=0 go install or go build)", err))
	}
	if res.ExitCode != 0 {
		return fail(exitCannotRun, fmt.Errorf("--dataplane vm: the kernel check inside the VM (kernel %s) ended with exit code %d", res.Kernel, res.ExitCode))
	}
	if console.line == nil {
		return fail(exitCannotRun, errors.New("--dataplane vm: the migrate inside the VM printed no kernel check line"))
	}
	var k migrate.KernelResult
	if err := json.Unmarshal(console.line, &k); err != nil {
		return fail(exitCannotRun, fmt.Errorf("--dataplane vm: the kernel check line: %w", err))
	}
	if err := r.SetKernelResult(k); err != nil {
		return fail(exitInternal, fmt.Errorf("--dataplane vm: %w", err))
	}
	return nil
}

// markedLine passes a VM's console through to w, but keeps the text after
// marker on the line that carries it.
type markedLine struct {
	marker string
	w      io.Writer
	buf    []byte
	line   []byte
}

func (c *markedLine) Write(p []byte) (int, error) {
	c.buf = append(c.buf, p...)
	for {
		i := bytes.IndexByte(c.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := c.buf[:i+1]
		c.buf = c.buf[i+1:]
		if j := bytes.Index(line, []byte(c.marker)); j >= 0 {
			c.line = bytes.Clone(bytes.TrimSpace(line[j+len(c.marker):]))
			continue
		}
		if _, err := c.w.Write(line); err != nil {
			return 0, err
		}
	}
}
