package calibrate

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxysim/proxysim/netns"
	"github.com/proxysim/proxysim/sim/costprofile"
)

// TestKilledCalibrationLeavesNothing runs a calibration in a child process
// (this test binary again), SIGKILLs it while iptables-restore programs its
// namespace, and checks that nothing is left: no process in that network
// namespace (so the namespace and its tables are gone with it), no
// process the calibration started, no named namespace of it.
func TestKilledCalibrationLeavesNothing(t *testing.T) {
	if os.Getenv("PROXYSIM_CALIBRATE_CHILD") == "1" {
		_, err := Run(Options{Dataplanes: []string{costprofile.IPTablesNFT}, Shapes: []Shape{{3000, 2}, {3000, 2}}, Repeats: 5})
		t.Fatalf("the calibration ended before it was killed: %v", err)
	}
	if !netns.Privileged() {
		t.Skip("needs root")
	}
	if _, err := netns.LookIPTables(netns.NFT); err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledCalibrationLeavesNothing$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PROXYSIM_CALIBRATE_CHILD=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer cmd.Process.Kill()
	// Wait for a restore of the calibration, and note its namespace.
	var child int
	var nsInode string
	deadline := time.Now().Add(2 * time.Minute)
	for child == 0 && time.Now().Before(deadline) {
		for _, p := range childrenOf(pid) {
			// The full restore: one still running 300ms after it was seen.
			if strings.Contains(cmdline(p), "iptables-restore") {
				time.Sleep(300 * time.Millisecond)
				if !alive(p) {
					continue
				}
				if ino, err := os.Readlink("/proc/" + strconv.Itoa(p) + "/ns/net"); err == nil {
					child, nsInode = p, ino
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if child == 0 {
		t.Fatal("no iptables-restore of the calibration seen in 2 minutes")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// The restore dies with it (its death signal), well before it could
	// have finished a 3,000-Service payload: dead is gone, or a zombie
	// waiting for init to reap it.
	gone := time.Now().Add(200 * time.Millisecond)
	for alive(child) {
		if time.Now().After(gone) {
			t.Fatalf("iptables-restore %d outlived the calibration by 200ms", child)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The kernel delivers the children's death signal as the threads go.
	deadline = time.Now().Add(10 * time.Second)
	for {
		left := processesInNamespace(nsInode)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes still in the calibration's namespace %s after the kill: %v", nsInode, left)
		}
		time.Sleep(50 * time.Millisecond)
	}
	named, _ := filepath.Glob("/var/run/netns/" + netns.Prefix + "*-" + strconv.Itoa(pid) + "-*")
	if len(named) > 0 {
		t.Errorf("named namespaces left: %v", named)
	}
	if mounts, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(mounts), nsInode) {
		t.Errorf("namespace %s is still mounted somewhere", nsInode)
	}
}

func childrenOf(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

func cmdline(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.ReplaceAll(string(b), "\x00", " ")
}

func processesInNamespace(ino string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/net"); err == nil && l == ino {
			out = append(out, p)
		}
	}
	return out
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}
