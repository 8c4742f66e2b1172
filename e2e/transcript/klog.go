package transcript

import (
	"flag"
	"io"

	"k8s.io/klog/v2"
)

// SilenceKlog sends klog's output nowhere, for the test binaries that run
// kube-proxy's own code: it logs through klog's globals, and the random
// inputs of the comparisons make it complain by design.
func SilenceKlog() {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
}
