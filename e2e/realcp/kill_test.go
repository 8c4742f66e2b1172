package realcp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxysim/proxysim/e2e/transcript"
	"github.com/proxysim/proxysim/netns"
	"github.com/proxysim/proxysim/scenarios"
)

const killChildEnv = "PROXYSIM_REALCP_KILL_CHILD"

// readyFile is where the child of TestKilledRunLeavesNothing says what it
// runs, once kube-proxy has synced: lines "key value".
const readyFile = "ready"

// TestKilledRunChild is the run TestKilledRunLeavesNothing kills: a
// control plane and kube-proxy, up and synced, waiting.
func TestKilledRunChild(t *testing.T) {
	if os.Getenv(killChildEnv) == "" {
		t.Skip("the child of TestKilledRunLeavesNothing")
	}
	s, err := scenarios.LoadLibrary("churn-iptables")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transcript.Record(s)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configOf(s, netns.NFT)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cp := startControlPlane(t, dir)
	for _, o := range tr.Initial {
		if err := apply(context.Background(), cp.client, "add", o, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	kp := startKubeProxy(t, cp, dir, kubeProxyBinary(t), cfg)
	if err := kp.log.waitSyncs(1, 90*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, kp.log.Tail(40))
	}
	info := fmt.Sprintf("kube-proxy %d\napiserver %d\netcd %s\nnamespace %s\n", kp.cmd.Process.Pid, cp.port, cp.etcd.Clients[0].Addr(), kp.ns.Name)
	if err := os.WriteFile(filepath.Join(runDir.Path, readyFile), []byte(info), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Minute) // until killed
}

// TestKilledRunLeavesNothing SIGKILLs a run with etcd and the API server
// up and kube-proxy synced, then checks what a killed run can leave:
// kube-proxy must die with it (Pdeathsig), etcd's and the API server's
// ports must be closed (they lived in the killed process), and the
// namespace and temp folder it left must be removed by the next run's
// sweeps, which must spare a live run's.
func TestKilledRunLeavesNothing(t *testing.T) {
	requireRoot(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledRunChild$", "-test.v")
	cmd.Env = append(os.Environ(), killChildEnv+"=1", "TMPDIR="+hostTemp)
	out, err := os.Create(filepath.Join(t.TempDir(), "child.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	childLog := func() string { b, _ := os.ReadFile(out.Name()); return string(b) }

	// The child's run folder, and its ready file.
	var folder string
	info := map[string]string{}
	deadline := time.Now().Add(5 * time.Minute)
	for len(info) == 0 {
		select {
		case err := <-waited:
			t.Fatalf("the child ended before it was killed: %v\n%s", err, childLog())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the child was not ready after 5 minutes:\n%s", childLog())
		}
		matches, _ := filepath.Glob(filepath.Join(hostTemp, fmt.Sprintf("%s%d-*", workPrefix, pid)))
		for _, m := range matches {
			if f, err := os.Open(filepath.Join(m, readyFile)); err == nil {
				sc := bufio.NewScanner(f)
				for sc.Scan() {
					k, v, _ := strings.Cut(sc.Text(), " ")
					info[k] = v
				}
				f.Close()
				folder = m
			}
		}
	}
	proxyPID, err := strconv.Atoi(info["kube-proxy"])
	if err != nil {
		t.Fatalf("ready file: %v", info)
	}
	if !alive(proxyPID) {
		t.Fatalf("kube-proxy (pid %d) is not running before the kill", proxyPID)
	}
	// A sweep while the child lives must spare its namespace and folder.
	if _, err := netns.Sweep(); err != nil {
		t.Fatal(err)
	}
	if _, err := sweepWorkDirs(hostTemp); err != nil {
		t.Fatal(err)
	}
	if !exists(filepath.Join("/var/run/netns", info["namespace"])) || !exists(folder) {
		t.Fatalf("a sweep removed a live run's namespace %s or folder %s", info["namespace"], folder)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-waited
	// kube-proxy gets SIGKILL from the kernel as its parent's thread dies.
	for end := time.Now().Add(10 * time.Second); alive(proxyPID); {
		if time.Now().After(end) {
			t.Fatalf("kube-proxy (pid %d) outlived the killed run", proxyPID)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, addr := range []string{"127.0.0.1:" + info["apiserver"], info["etcd"]} {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still answers after the kill", addr)
		}
	}
	// The killed run's leftovers, before the next run's sweep.
	if !exists(filepath.Join("/var/run/netns", info["namespace"])) {
		t.Errorf("namespace %s is already gone: the sweep below proves nothing", info["namespace"])
	}
	if !exists(folder) {
		t.Errorf("folder %s is already gone: the sweep below proves nothing", folder)
	}
	if _, err := netns.Sweep(); err != nil {
		t.Fatal(err)
	}
	if _, err := sweepWorkDirs(hostTemp); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join("/var/run/netns", info["namespace"])) {
		t.Errorf("namespace %s outlived the sweep", info["namespace"])
	}
	if exists(folder) {
		t.Errorf("temp folder %s outlived the sweep", folder)
	}
	if left, _ := filepath.Glob(filepath.Join("/var/run/netns", fmt.Sprintf("%srealcp-%d-*", netns.Prefix, pid))); len(left) > 0 {
		t.Errorf("namespaces of the killed run remain: %v", left)
	}
	if procs := processesOf(proxyPID); procs != "" {
		t.Errorf("still running: %s", procs)
	}
}

// alive reports whether pid is a process that is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// state is the field after the parenthesised command name
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return !errors.Is(err, os.ErrNotExist)
}

// processesOf names pid if it still runs.
func processesOf(pid int) string {
	if !alive(pid) {
		return ""
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return fmt.Sprintf("pid %d (%s)", pid, strings.ReplaceAll(string(b), "\x00", " "))
}
