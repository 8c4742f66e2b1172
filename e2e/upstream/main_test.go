package upstream

import (
	"flag"
	"os"
	"testing"

	"github.com/proxysim/proxysim/e2e/transcript"
)

// TestMain silences kube-proxy's logging: the random inputs make it complain
// by design.
func TestMain(m *testing.M) {
	transcript.SilenceKlog()
	flag.Parse()
	os.Exit(m.Run())
}
