package scenarios

import (
	"strconv"
	"strings"
	"testing"
)

func TestWithSettingsReplacesAddsAndRevalidates(t *testing.T) {
	base, err := LoadLibrary("min-sync-period-1s")
	if err != nil {
		t.Fatal(err)
	}
	s, err := base.WithSettings([]Setting{
		{Path: "proxy.minSyncPeriod", Value: "10s"},      // replaced
		{Path: "proxy.retryInterval", Value: "3s"},       // added
		{Path: "timeline[0].churn.count", Value: "4"},    // into a list
		{Path: "proxy.syncCost", Value: "{fixed: 50ms}"}, // a mapping
		{Path: "timeline.1.expect.syncs.between", Value: "[1s, 8s]"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Proxy.MinSyncPeriod.D().String(); got != "10s" {
		t.Errorf("minSyncPeriod %s, want 10s", got)
	}
	if s.Proxy.RetryInterval == nil || s.Proxy.RetryInterval.D().String() != "3s" {
		t.Errorf("retryInterval %v, want 3s", s.Proxy.RetryInterval)
	}
	if got := s.Proxy.SyncCost.Fixed.String(); got != "50ms" {
		t.Errorf("syncCost.fixed %s, want 50ms", got)
	}
	if c := s.Timeline[0].Actions[0].(*ChurnStep).Churn; c.Count != 4 {
		t.Errorf("churn count %d, want 4", c.Count)
	}
	// The original is untouched, and the copy is the same story otherwise.
	if base.Proxy.MinSyncPeriod.D().String() != "1s" || base.Proxy.RetryInterval != nil {
		t.Errorf("the base scenario changed: %+v", base.Proxy)
	}
	if s.Name != base.Name || len(s.Initial) != len(base.Initial) || s.Digest() == "" || s.Digest() == base.Digest() {
		t.Errorf("copy: name %q, %d objects, digest %q", s.Name, len(s.Initial), s.Digest())
	}
}

func TestWithSettingsRefusesBadPathsAndValues(t *testing.T) {
	base, err := LoadLibrary("min-sync-period-1s")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		set  Setting
		want string
	}{
		{Setting{"proxy.minSyncPeriodd", "1s"}, "proxy.minSyncPeriodd=1s: proxy.minSyncPeriodd: unknown field"},
		{Setting{"proxy.minSyncPeriod", "soon"}, "proxy.minSyncPeriod=soon: proxy.minSyncPeriod:"},
		{Setting{"proxy.version", "v0.9.0"}, "proxy.version=v0.9.0: proxy.version:"},
		{Setting{"proxy.version.major", "1"}, "proxy.version is a scalar, not a mapping"},
		{Setting{"timeline[7].at", "1s"}, "timeline has 2 entries: no [7]"},
		{Setting{"proxy[0]", "1s"}, "proxy is not a list"},
		{Setting{"proxy..mode", "ipvs"}, "empty field name"},
		{Setting{"timeline[x].at", "1s"}, "bad index"},
		{Setting{"proxy.minSyncPeriod", " "}, "empty value"},
		{Setting{"proxy.minSyncPeriod", "[1s"}, "not a YAML value"},
	} {
		_, err := base.WithSettings([]Setting{c.set})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.set, err, c.want)
		}
	}
	// Two settings that clash, in a field neither names, are blamed together.
	_, err = base.WithSettings([]Setting{{"proxy.minSyncPeriod", "1m"}, {"proxy.version", "v1.34.0"}})
	if err == nil || !strings.HasPrefix(err.Error(), "proxy.minSyncPeriod=1m with proxy.version=v1.34.0: proxy.syncPeriod: syncPeriod 30s is shorter") {
		t.Errorf("clash: %v", err)
	}
}

func TestSettingPathsSplitIntoKeysAndIndices(t *testing.T) {
	for in, want := range map[string]string{
		"proxy.minSyncPeriod":                  "proxy minSyncPeriod",
		"timeline[2].at":                       "timeline [2] at",
		"timeline.2.at":                        "timeline [2] at",
		"objects[0].endpoints[1].addresses[0]": "objects [0] endpoints [1] addresses [0]",
		"a[1][2]":                              "a [1] [2]",
	} {
		steps, err := parseSettingPath(in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		var parts []string
		for _, s := range steps {
			if s.index >= 0 {
				parts = append(parts, "["+strconv.Itoa(s.index)+"]")
			} else {
				parts = append(parts, s.key)
			}
		}
		if got := strings.Join(parts, " "); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
	for _, bad := range []string{"", "a..b", "a[", "a[-1]", "a[1]x", ".a", "a.-1"} {
		if _, err := parseSettingPath(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
