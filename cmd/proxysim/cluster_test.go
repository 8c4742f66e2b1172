package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	serjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
)

// replay --shard and cluster merge give what --shard 0/1 gives, through
// files; merge refuses a missing shard, and replay bad shard flags.
func TestClusterShardCLI(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for _, sh := range []string{"0/2", "1/2", "0/1"} {
		f := filepath.Join(dir, strings.ReplaceAll(sh, "/", "-")+".json")
		if code, out, errs := runCLI("replay", "cluster-pools-iptables", "--shard", sh, "-o", f); code != exitPass {
			t.Fatalf("--shard %s: code %d\n%s%s", sh, code, out, errs)
		}
		files = append(files, f)
	}
	code, two, errs := runCLI("cluster", "merge", files[1], files[0])
	if code != exitPass || !strings.HasPrefix(two, "PASS cluster-pools-iptables (1 check, 6m0s virtual)\n  cluster: 12 nodes") {
		t.Fatalf("merge: code %d\n%s%s", code, two, errs)
	}
	if _, one, _ := runCLI("cluster", "merge", files[2]); one != two {
		t.Errorf("2 shards merged:\n%s\none shard:\n%s", two, one)
	}
	if code, _, errs := runCLI("cluster", "merge", files[0]); code != exitInvalid || !strings.Contains(errs, "shard 1/2 is missing") {
		t.Errorf("one of two shards: code %d, %s", code, errs)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI("cluster", "merge", bad); code != exitInvalid || !strings.Contains(errs, "bad.json") {
		t.Errorf("not a shard file: code %d, %s", code, errs)
	}
	for _, c := range [][]string{
		{"replay", "cluster-pools-iptables", "--shard", "2/2"},
		{"replay", "cluster-pools-iptables", "-o", filepath.Join(dir, "x.json")},
		{"replay", "churn-iptables", "--shard", "0/2"},
		{"replay", "churn-iptables", "cluster-pools-iptables", "--shard", "0/2"},
	} {
		if code, _, errs := runCLI(c...); code != exitInvalid {
			t.Errorf("%v: code %d, want %d: %s", c, code, exitInvalid, errs)
		}
	}
}

// TestClusterIndexedJobExampleRuns reads docs/cluster-indexed-job.yaml as
// the API server would (strictly, as batch/v1), runs its pod's command for
// every index as the pods would, and merges the shards.
func TestClusterIndexedJobExampleRuns(t *testing.T) {
	data, err := os.ReadFile("../../docs/cluster-indexed-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := serjson.NewSerializerWithOptions(serjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, serjson.SerializerOptions{Yaml: true, Strict: true})
	obj, _, err := dec.Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	job, ok := obj.(*batchv1.Job)
	if !ok || job.Spec.CompletionMode == nil || *job.Spec.CompletionMode != batchv1.IndexedCompletion || job.Spec.Completions == nil {
		t.Fatalf("not an Indexed Job with completions: %T", obj)
	}
	args := append([]string(nil), job.Spec.Template.Spec.Containers[0].Args...)
	n := int(*job.Spec.Completions)
	shard, out := slices.Index(args, "--shard")+1, slices.Index(args, "-o")+1
	if args[0] != "replay" || shard == 0 || out == 0 || args[shard] != fmt.Sprintf("/%d", n) || !strings.Contains(args[out], "$(JOB_COMPLETION_INDEX)") {
		t.Fatalf("the pod does not run shard $(JOB_COMPLETION_INDEX) of %d writing a file per index: %q", n, args)
	}
	dir := t.TempDir()
	var files []string
	for i := range n {
		t.Setenv("JOB_COMPLETION_INDEX", fmt.Sprint(i))
		args[out] = filepath.Join(dir, fmt.Sprintf("shard-%d.json", i))
		if code, _, errs := runCLI(args...); code != exitPass {
			t.Fatalf("index %d: %q: code %d: %s", i, args, code, errs)
		}
		files = append(files, args[out])
	}
	if code, text, errs := runCLI(append([]string{"cluster", "merge"}, files...)...); code != exitPass || !strings.Contains(text, "SLI (as ClusterLoader2)") {
		t.Errorf("merge: code %d: %s%s", code, text, errs)
	}
}
