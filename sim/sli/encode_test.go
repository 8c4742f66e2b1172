package sli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Parts that cross processes as JSON and merge give the bytes of one
// aggregate of every node; a part that lost a sum does not.
func TestPartRoundTripIsExact(t *testing.T) {
	nodes := randomNodes(30, 11)
	whole := New(Config{Nodes: 30}, time.Hour)
	for _, n := range nodes {
		if err := whole.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	want := fmt.Sprintf("%#v", whole.Result())
	var merged *Aggregate
	var lossy []byte
	for s := range 3 {
		part := New(Config{Nodes: 30}, time.Hour)
		for i := s; i < len(nodes); i += 3 {
			if err := part.Add(nodes[i]); err != nil {
				t.Fatal(err)
			}
		}
		p, err := part.Part()
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var back Part
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if s == 1 {
			back.Sums = back.Sums[1:]
			lossy, _ = json.Marshal(back)
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
		}
		a, err := FromPart(back)
		if err != nil {
			t.Fatal(err)
		}
		if merged == nil {
			merged = a
		} else if err := merged.Merge(a); err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprintf("%#v", merged.Result()); got != want {
		t.Errorf("3 parts through JSON differ from one aggregate:\n%s\n%s", got, want)
	}
	var back Part
	if err := json.Unmarshal(lossy, &back); err != nil {
		t.Fatal(err)
	}
	a, err := FromPart(back)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%#v", a.Result()) == fmt.Sprintf("%#v", merged.Result()) {
		t.Error("a part missing a rate sum gives the same result: the sums are not what the result is made of")
	}
	back.Truth.Keys = back.Truth.Keys[:len(back.Truth.Keys)-3]
	if _, err := FromPart(back); err == nil || !strings.Contains(err.Error(), "8-byte") {
		t.Errorf("truncated exact values: %v", err)
	}
}
