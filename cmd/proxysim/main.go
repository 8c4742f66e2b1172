// Command proxysim replays, validates, traces, lists and shows proxysim
// scenarios, on the fake dataplane or a real kernel, and runs a static binary
// in a VM with Debian's cloud kernel (vm).
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
