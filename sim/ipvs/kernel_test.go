package ipvs_test

import (
	"strings"
	"testing"

	"github.com/proxysim/proxysim/sim/ipvs"
)

func TestParseKernelVersion(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ipvs.KernelVersion
	}{
		{"6.1.0", ipvs.KernelVersion{Major: 6, Minor: 1}},
		{"5.4", ipvs.KernelVersion{Major: 5, Minor: 4}},
		{"6.12.117", ipvs.KernelVersion{Major: 6, Minor: 12, Patch: 117}},
		// A Debian release alone names its ABI: patch 0, whatever the
		// upstream version is.
		{"5.10.0-46-cloud-amd64", ipvs.KernelVersion{Major: 5, Minor: 10}},
		// The upstream version in parentheses decides, as netns reports it
		// and as uname -v prints it.
		{"5.10.0-46-cloud-amd64 (5.10.262)", ipvs.KernelVersion{Major: 5, Minor: 10, Patch: 262}},
		{"5.10.0-46-cloud-amd64 (Debian 5.10.262-1)", ipvs.KernelVersion{Major: 5, Minor: 10, Patch: 262}},
		{"6.12.117+deb13-cloud-amd64 (6.12.117)", ipvs.KernelVersion{Major: 6, Minor: 12, Patch: 117}},
		{" 6.1.0-56-cloud-amd64  ( 6.1.192 ) ", ipvs.KernelVersion{Major: 6, Minor: 1, Patch: 192}},
	} {
		got, err := ipvs.ParseKernelVersion(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseKernelVersion(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for in, why := range map[string]string{
		"6":                                     "MAJOR.MINOR",
		"x.1":                                   "MAJOR.MINOR",
		"5.10.0-46-cloud-amd64 (5.10.262":       "RELEASE (UPSTREAM)",
		"5.10.0-46-cloud-amd64 (5.10)":          "MAJOR.MINOR.PATCH",
		"5.10.0-46-cloud-amd64 (Ubuntu 5.10.1)": "MAJOR.MINOR.PATCH",
		"5.10.0-46-cloud-amd64 (6.1.2)":         "differ",
		"(5.10.262)":                            "MAJOR.MINOR",
	} {
		_, err := ipvs.ParseKernelVersion(in)
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ParseKernelVersion(%q) error = %v, want one saying %q", in, err, why)
		}
	}
}

func TestKernelVersionCompare(t *testing.T) {
	v := func(s string) ipvs.KernelVersion {
		k, err := ipvs.ParseKernelVersion(s)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"5.10.82", "5.10.83", -1},
		{"5.10.83", "5.10.83", 0},
		{"5.10.262", "5.10.83", 1},
		{"5.9.0", "5.10.0", -1}, // numeric, not lexical
		{"6.1.0", "5.16.0", 1},
	} {
		if got := v(tc.a).Compare(v(tc.b)); got != tc.want {
			t.Errorf("%s compared with %s = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
	if !v("5.9.0").AtLeast(5, 9) || v("5.8.18").AtLeast(5, 9) || !v("5.10.0").AtLeast(5, 9) {
		t.Error("AtLeast compares major.minor against MAJOR.MINOR.0")
	}
}
