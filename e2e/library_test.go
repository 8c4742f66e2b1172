package e2e

import (
	"bytes"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/proxysim/proxysim/scenarios"
	_ "github.com/proxysim/proxysim/scenarios/controllers"  // the Kubernetes controllers
	_ "github.com/proxysim/proxysim/scenarios/ingressnginx" // the ingress-nginx controller
	_ "github.com/proxysim/proxysim/scenarios/iptablesmode" // the iptables mode
	_ "github.com/proxysim/proxysim/scenarios/ipvsmode"     // the IPVS mode, the default
	_ "github.com/proxysim/proxysim/scenarios/nftablesmode" // the nftables mode
	"github.com/proxysim/proxysim/scenarios/replay"
)

// describe renders a result's failures the way the CLI does, so that a
// failing spec says what was expected, what happened and when.
func describe(res *replay.Result) string {
	var b strings.Builder
	replay.Report(&b, res, false)
	return b.String()
}

var _ = Describe("the bundled scenario library", Label("library"), func() {
	names := scenarios.TestedLibraryNames()

	It("holds at least fifteen scenarios", func() {
		Expect(len(names)).To(BeNumerically(">=", 15))
	})

	for _, name := range names {
		It("replays "+name+" on the fake dataplane", func() {
			s, err := scenarios.LoadLibrary(name)
			Expect(err).NotTo(HaveOccurred())
			Expect(strings.TrimSpace(s.Description)).NotTo(BeEmpty(), "every bundled scenario tells its story")
			res, err := replay.Replay(s, replay.Options{})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Failures).To(BeEmpty(), describe(res))
			Expect(res.Checks).To(BeNumerically(">", 0), "a scenario that checks nothing proves nothing")
		})
	}

	It("replays every scenario to a byte-identical trace", func() {
		for _, name := range names {
			s, err := scenarios.LoadLibrary(name)
			Expect(err).NotTo(HaveOccurred())
			first, err := replay.Replay(s, replay.Options{})
			Expect(err).NotTo(HaveOccurred())
			again, err := replay.Replay(s, replay.Options{})
			Expect(err).NotTo(HaveOccurred())
			Expect(bytes.Equal(first.Trace.JSONL(), again.Trace.JSONL())).To(BeTrue(), name)
		}
	})
})
