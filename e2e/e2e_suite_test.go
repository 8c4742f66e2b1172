// Package e2e wires the engine, the scenario library and the dataplanes
// together in ginkgo suites: every bundled scenario replays as its own spec
// on the fake dataplane, so `go test ./...` runs the whole library; the
// privileged suite (label kernel) runs each IPVS behaviour on the fake and on
// a real kernel, and skips the kernel half where there is none.
package e2e

import (
	"testing"

	"github.com/proxysim/proxysim/netns"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "proxysim e2e")
}

// A previous run that was killed may have left namespaces behind: sweep them
// before starting (only root can have made them).
var _ = BeforeSuite(func() {
	if !netns.Privileged() {
		return
	}
	removed, err := netns.Sweep()
	Expect(err).NotTo(HaveOccurred())
	if len(removed) > 0 {
		GinkgoWriter.Printf("swept %d namespaces left by an earlier run: %v\n", len(removed), removed)
	}
})
