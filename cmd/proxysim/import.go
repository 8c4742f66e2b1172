package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/clusterimport"
	"github.com/proxysim/proxysim/scenarios/replay"
)

// newImport is `proxysim import`: a scenario skeleton for one node of a
// real cluster, from a kubectl dump and its kube-proxy configuration.
func newImport(stdout, stderr io.Writer, strict *bool) *cobra.Command {
	var o clusterimport.ImportOptions
	cmd := &cobra.Command{
		Use:   "import --cluster DUMP --config KUBE-PROXY-CONFIG --node NAME -o SCENARIO",
		Short: "Write a scenario for one node of a real cluster, from a kubectl dump and its kube-proxy configuration",
		Long: `import writes a scenario skeleton for one node: the proxy settings from the
kube-proxy configuration (a KubeProxyConfiguration, or the kube-proxy
ConfigMap as 'kubectl -n kube-system get cm kube-proxy -o yaml' prints it),
the node's name, addresses and zone, the dump as its objects ('kubectl get
svc,endpointslices,pods,nodes -A -o yaml'), and one step whose golden table a
first replay fills in. The dump and the configuration are copied beside the
scenario when they are elsewhere. The scenario replays green; add steps.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Strict = *strict
			imp, err := clusterimport.Import(o)
			if err != nil {
				return fail(exitInvalid, err)
			}
			printWarnings(stderr, imp.Warnings)
			for _, c := range imp.Copied {
				fmt.Fprintf(stderr, "copied %s (a scenario reads only files in its folder)\n", c)
			}
			s := imp.Scenario
			fmt.Fprintf(stdout, "wrote %s: node %s, mode %s, kube-proxy %s, %d objects\n", o.Output, s.Proxy.NodeName, s.Proxy.Mode, s.Proxy.Version, len(s.Initial))
			replay.Report(stdout, imp.Result, false)
			if !imp.Result.Passed() {
				return fail(exitFail, nil)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Cluster, "cluster", "", "the cluster dump: kubectl get svc,endpointslices,pods,nodes -A -o yaml (or -o json)")
	cmd.Flags().StringVar(&o.Config, "config", "", "kube-proxy's configuration: a KubeProxyConfiguration file or the kube-proxy ConfigMap")
	cmd.Flags().StringVar(&o.Node, "node", "", "the node whose kube-proxy to replay")
	cmd.Flags().StringVarP(&o.Output, "output", "o", "", "the scenario file to write")
	for _, f := range []string{"cluster", "config", "node", "output"} {
		_ = cmd.MarkFlagRequired(f)
	}
	return cmd
}

// printWarnings prints what loading noted: skipped objects, settings not
// modelled.
func printWarnings(w io.Writer, ps scenarios.Problems) {
	for _, p := range ps {
		fmt.Fprintf(w, "warning: %s\n", p.Error())
	}
}
