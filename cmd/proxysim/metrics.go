package main

import (
	"fmt"
	"os"
	"time"

	"github.com/proxysim/proxysim/scenarios/replay"
)

// metricsAtFlag is --metrics-at: a virtual instant from the proxy's start.
type metricsAtFlag struct{ d **time.Duration }

func (f *metricsAtFlag) String() string {
	if *f.d == nil {
		return ""
	}
	return (*f.d).String()
}

func (f *metricsAtFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if d < 0 {
		return fmt.Errorf("a virtual instant cannot be negative")
	}
	*f.d = &d
	return nil
}

func (f *metricsAtFlag) Type() string { return "duration" }

// writeMetrics writes the replay's kube-proxy metrics exposition to file.
func writeMetrics(file string, res *replay.Result) error {
	if res.Metrics == nil {
		return fmt.Errorf("%s: mode %q has no kube-proxy metrics", res.Scenario.Name, res.Scenario.Proxy.Mode)
	}
	return os.WriteFile(file, res.Metrics, 0o644)
}
