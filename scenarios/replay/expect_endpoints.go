package replay

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/proxysim/proxysim/scenarios"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func checkEndpointsExpectation(e *scenarios.EndpointsExpectation, r *Run) {
	ee := e.Endpoints
	if ee == nil {
		return
	}
	ns := scenarios.NamespaceOf("Endpoints", ee.Namespace)
	what := scenarios.KeyOf("Endpoints", ns, ee.Name)
	obj, err := r.World().Get("Endpoints", [2]string{ns, ee.Name})
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		r.Fail(ee.Src.At("name"), "endpoints", what, err.Error())
		return
	}
	wantExists := ee.Exists == nil || *ee.Exists
	if exists != wantExists {
		r.Fail(ee.Src.At("exists"), "endpoints.exists", fmt.Sprintf("%s exists: %v", what, wantExists), fmt.Sprint(exists))
		return
	}
	if !exists {
		return
	}
	ep := obj.(*v1.Endpoints)
	var ready, notReady []string
	for _, s := range ep.Subsets {
		ready = append(ready, addrStrings(s.Addresses)...)
		notReady = append(notReady, addrStrings(s.NotReadyAddresses)...)
	}
	check := func(key string, want, got []string) {
		if want == nil {
			return
		}
		w := append([]string(nil), want...)
		sort.Strings(w)
		got = uniqueStrings(got)
		if strings.Join(w, ", ") != strings.Join(got, ", ") {
			r.Fail(ee.Src.At(key), "endpoints."+key, "["+strings.Join(w, ", ")+"]", "["+strings.Join(got, ", ")+"]")
		}
	}
	check("addresses", ee.Addresses, ready)
	check("notReadyAddresses", ee.NotReadyAddresses, notReady)
}

func addrStrings(as []v1.EndpointAddress) []string {
	var out []string
	for _, a := range as {
		s := a.IP
		if a.Hostname != "" {
			s += " " + a.Hostname
		}
		out = append(out, s)
	}
	return out
}

func uniqueStrings(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}
