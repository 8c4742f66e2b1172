// Package scenarios reads and validates proxysim scenarios: YAML files
// that set up a proxy and a cluster, tell a story on a virtual timeline,
// and say what must be true along the way. The format is defined in
// docs/scenario-format.md. Replaying a scenario is scenarios/replay's: this
// package runs nothing and imports no replay.
//
// The entry points: Load, LoadLibrary or Parse a scenario; replay.Replay
// replays it on proxysim's engine (what the CLI does). The package's
// examples show each.
//
// Loading never runs anything: a file with any problem is rejected whole,
// with every problem reported as file:line:column: field.path: message.
//
// The core names no proxy mode: a mode (its proxy fields, steps,
// expectations, goldens and dataplanes) plugs in with RegisterMode, and a
// program imports the modes it replays (IPVS: scenarios/ipvsmode). It must
// not import a mode, fakes or the kernel packages.
//
// # What lives where
//
// Each part of a timeline (a step action, a fault, an expectation) is a
// type of this package, or of a mode or a controller, that checks itself
// when the file loads (Validate). What it does when it replays is
// scenarios/replay's: the core's parts by their kind there, a mode's or a
// controller's by its own Do or Check on a replay.Run. The files, by
// concern:
//
//   - The file format and its loading: scenario.go (the types of a file);
//     decode.go, parts.go and validator.go (a mapping decoded across the
//     core and the mode's parts, problems at file:line:column); mode.go
//     and controllers.go (the registries of modes, parts and controllers);
//     load.go, folder.go and library.go (where files come from: a folder
//     no reference leaves, the bundled library); manifests.go,
//     fastyaml.go, inline.go, dump.go, objects.go and patch.go (the
//     cluster's objects: manifests, cluster dumps, patches); validate.go
//     and validate_networking.go (the API server's rules for them);
//     kubeproxyconfig.go and kubeproxyconfig_lenient.go (proxy.config);
//     cluster.go, pools.go and churn_gen.go (cluster.generate,
//     cluster.pools, cluster.churn); settings.go (WithSettings, for
//     sweeps); importing.go (what scenarios/clusterimport reads through the
//     loader).
//   - The timeline's vocabulary as a file holds it, each part one type that
//     validates itself: steps_*.go (actions and faults; steps_runner.go is
//     the runner's), expect_*.go (expectations; expect_cluster.go the node
//     step and the cluster expectation of cluster.pools), goldens.go (a
//     mode's golden), synccost.go (syncCost).
//
// Around it: scenarios/replay replays a scenario (Replay, Replayer, Run,
// Report); scenarios/bubble replays the same timeline against a proxy of
// one's own in a testing/synctest bubble (Replay, and Options.Compare:
// proxysim's model of kube-proxy beside it), stepping a replay.Replayer;
// scenarios/clusterimport writes a scenario for a node of a real cluster;
// the modes (scenarios/ipvsmode, iptablesmode, nftablesmode), the
// controllers (scenarios/controllers, ingressnginx) and routeexpect plug in
// (a mode that hosts a proxy under test implements bubble.OwnProxyMode);
// scenarios/suite, sweep, migrate and report build on Load and Replay.
package scenarios
