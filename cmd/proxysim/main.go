// Command proxysim replays, validates and traces proxysim scenarios.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
