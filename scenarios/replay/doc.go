// Package replay replays a scenario that package scenarios loaded: it
// builds the world (sim) with the scenario's mode's dataplane, steps the
// timeline on the virtual clock, checks every expectation, and returns the
// Result, which Report prints for a person.
//
// The entry points: Replay (a whole scenario, what the CLI's replay does)
// and Replayer (the same pieces a step at a time, for a driver that holds
// the clock itself: scenarios/bubble). The package's example shows Replay.
//
// A part of a timeline is loaded by package scenarios (its Validate) and
// replayed here: a core part by its kind (parts.go), a mode's or a
// controller's by its own Do or Check (Action, Expectation), given the Run
// that says what it may see and where it reports; a controller's settings
// join the replay with Attach (Attacher).
//
// # What lives where
//
//   - The replay: replay.go (Replay, Options, Result: the world built, the
//     timeline stepped, expectations checked), replayer.go (Replayer),
//     run.go (Run, what a part sees while it replays), parts.go (the core
//     parts by kind, and the interfaces a mode's parts implement),
//     budget.go (the event and memory budget).
//   - What each core part does: steps_*.go (actions and faults; churn
//     and rollout keep their state machines here), expect_*.go (how each
//     expectation is checked), goldens.go (a golden compared, and
//     --update's rewriting), synccost.go, churn_gen.go (a generated
//     create step), controllers.go (controllers attached, their state,
//     CheckInstants).
//   - A cluster: clusterrun.go (cluster.pools replayed in one world, the
//     node step, the cluster expectation), shard.go (a sharded cluster
//     replay's files and their merge).
//   - For people and sweeps: report.go (Report), summary.go (Summarize).
package replay
