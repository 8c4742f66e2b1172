// Package scenarios reads, validates and replays proxysim scenarios: YAML
// files that set up a proxy and a cluster, tell a story on a virtual
// timeline, and say what must be true along the way. The format is defined in
// docs/scenario-format.md.
//
// The entry points: Load, LoadLibrary or Parse a scenario; Replay it on
// proxysim's engine and print the Result with Report (what the CLI does).
// To replay it against a proxy of your own in a testing/synctest bubble,
// see scenarios/bubble, which steps a replay through Replayer. The
// package's examples show each.
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
// The format and its replay are one package on purpose: each part of a
// timeline (a step action, a fault, an expectation) is one type that checks
// itself when the file loads (Validate) and acts or checks when it replays
// (Do, Check, given a Run of this package's replay), and a mode or a
// controller plugs parts into both at once. The bubble, which drives the
// replay otherwise, is its own package (scenarios/bubble) over Replayer.
// The files, by concern:
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
//     cluster.go and pools.go (cluster.generate, cluster.pools);
//     settings.go (WithSettings, for sweeps); importing.go (what
//     scenarios/clusterimport reads through the loader).
//   - The timeline's vocabulary, each part loaded and replayed by one type:
//     steps_*.go (actions and faults; steps_runner.go is the runner's),
//     expect_*.go (expectations), goldens.go (a mode's golden, and
//     --update), synccost.go (syncCost).
//   - The replay: replay.go (Replay, Options, Result: the world built,
//     the timeline stepped, expectations checked), replayer.go (Replayer:
//     the same pieces a step at a time, for a driver that holds the clock
//     itself), run.go (what a part sees while it replays), budget.go (the
//     event and memory budget), clusterrun.go (cluster.pools replayed in
//     one world), report.go (Report, for a person), summary.go (Summarize,
//     for a sweep).
//
// Around it: scenarios/bubble replays the same timeline against a proxy of
// one's own in a testing/synctest bubble (Replay, and Options.Compare:
// proxysim's model of kube-proxy beside it), stepping a Replayer;
// scenarios/clusterimport writes a scenario for a node of a real cluster;
// the modes (scenarios/ipvsmode, iptablesmode, nftablesmode), the
// controllers (scenarios/controllers, ingressnginx) and routeexpect plug in
// (a mode that hosts a proxy under test implements bubble.OwnProxyMode);
// scenarios/suite, sweep, migrate and report build on Load and Replay.
package scenarios
