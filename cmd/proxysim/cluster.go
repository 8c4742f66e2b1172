package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
)

// replayShard replays one cluster scenario's shard (replay --shard) and
// writes its file.
func replayShard(arg, file string, list []*scenarios.Scenario, opts replay.Options, stdout, stderr io.Writer) error {
	sh, err := parseShard(arg, os.Getenv("JOB_COMPLETION_INDEX"))
	if err != nil {
		return fail(exitInvalid, err)
	}
	if len(list) != 1 {
		return fail(exitInvalid, fmt.Errorf("--shard needs exactly one scenario, got %d", len(list)))
	}
	s := list[0]
	if len(s.Nodes()) == 0 {
		return fail(exitInvalid, fmt.Errorf("--shard %s: %s has no cluster.pools: only a cluster's nodes are sharded", arg, s.Name))
	}
	opts.Shard = replay.Shard{Index: sh.Index, Count: sh.Count}
	res, err := replay.Replay(s, opts)
	if err != nil {
		fmt.Fprintf(stderr, "ERROR %s: %v\n", s.Name, err)
		return fail(exitCannotRun, nil)
	}
	b := res.Shard.JSON()
	if file == "" {
		if _, err := stdout.Write(b); err != nil {
			return fail(exitCannotRun, err)
		}
		return nil
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return fail(exitCannotRun, err)
	}
	fmt.Fprintf(stderr, "shard %d/%d of %s: %d of %d nodes, written to %s\n", sh.Index, sh.Count, s.Name, len(res.Shard.Results), len(s.Nodes()), file)
	return nil
}

func newCluster(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Work with a cluster replay split in shards (replay --shard)",
	}
	merge := &cobra.Command{
		Use:   "merge SHARD.json...",
		Short: "Join a cluster replay's shard files into its report and judge the cluster expectations",
		Long: `merge joins the files 'proxysim replay --shard I/N' wrote (in any order)
into the cluster's report: the SLI as ClusterLoader2 computes it and its
exact quantiles, the true pod latency, every node's syncs and CPU time, and
every expectation that did not hold, the cluster expectations judged on the
whole cluster. The report is byte for byte what one process gives for the
same scenario (docs/cluster.md). The shards must come from the same
scenario source and shard count, each exactly once; otherwise merge exits 2.

Exit codes: 0 every expectation held, 1 an expectation failed, 2 invalid
input.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var shards []*replay.ShardResult
			for _, name := range args {
				data, err := os.ReadFile(name)
				if err != nil {
					return fail(exitInvalid, err)
				}
				r, err := replay.ReadShard(name, data)
				if err != nil {
					return fail(exitInvalid, err)
				}
				shards = append(shards, r)
			}
			rep, err := replay.MergeShards(args, shards)
			if err != nil {
				return fail(exitInvalid, err)
			}
			rep.Text(stdout)
			if !rep.Passed() {
				return fail(exitFail, nil)
			}
			return nil
		},
	}
	cmd.AddCommand(merge)
	return cmd
}
