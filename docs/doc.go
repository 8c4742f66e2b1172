// Package docs holds proxysim's documentation and the test that keeps it
// true: go test ./docs checks every relative link of README.md and
// docs/**/*.md (file and #anchor, as GitHub resolves them), runs every shell
// block that shows a proxysim command and compares its exit code and shown
// output, and loads every YAML scenario snippet with the scenario loader.
// It has no code of its own: nothing imports it.
//
// Markers the test reads, each an HTML comment on the lines right before a
// fenced block (blank lines allowed between):
//
//	<!-- docs-test: skip: REASON -->   a command block the test cannot run (needs root, a cluster, ...)
//	<!-- docs-test: requires root iptables -->  run only as root with these commands on the PATH; else skipped, saying why
//	<!-- docs-test: fragment -->       a YAML block that is part of a scenario, not a whole one
//	<!-- docs-test: dir PATH -->       load a YAML scenario as if it lived in PATH (for the files it names)
//	<!-- docs-test: file PATH -->      the YAML block is the repository's file PATH, byte for byte, and it loads
//
// A command line may end with "# exit N" when the command is meant to exit
// N. A fenced block whose info string is "output", right after a command
// block, is the output the block's commands print (stdout and stderr, in
// order); a line "..." in it stands for any number of lines, "..." inside a
// line for any text, and the
// wall-clock time of a replay ("virtual in 4ms") is not compared.
package docs
