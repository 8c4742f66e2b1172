// Package e2e wires the engine, the scenario library and the dataplanes
// together in ginkgo suites: every bundled scenario replays as its own spec
// on the fake dataplane, so `go test ./...` runs the whole library.
package e2e

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "proxysim e2e")
}
