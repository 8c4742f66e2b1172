package main

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxysim/proxysim/netns/vm"
)

// vmRequired makes a missing QEMU or kernel cache a failure instead of a
// skip: `make vm-kill-test` sets it, so CI cannot pass by skipping.
const vmRequired = "PROXYSIM_VM_REQUIRED"

// A SIGKILLed `proxysim vm` takes its QEMU with it at once, and the next run
// removes the temp folder it left.
func TestKilledVMRunLeavesNoQEMUAndNoTempFolder(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	needVM(t, root)
	start := time.Now()
	bin := t.TempDir()
	proxysim := buildStatic(t, bin, "proxysim", ".")
	sleeper := buildStatic(t, bin, "sleeper", "./testdata/sleeper")
	tmp := t.TempDir() // the runs' TMPDIR: only their folders are in it
	t.Logf("built proxysim and the guest in %v", time.Since(start).Round(time.Millisecond))

	cmd := exec.Command(proxysim, "vm", sleeper, "120s")
	cmd.Dir = root // for .cache/vm
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	booted := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// Kill mid-run: once the guest binary says it sleeps.
	running := make(chan bool, 1)
	var console bytes.Buffer
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			console.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "sleeper: sleeping") {
				running <- true
			}
		}
		close(running)
	}()
	select {
	case ok := <-running:
		if !ok {
			t.Fatalf("proxysim vm ended before the guest ran:\n%s", console.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the guest did not start within 2 minutes")
	}
	t.Logf("guest running %v after start", time.Since(booted).Round(time.Millisecond))
	qemu := qemuOf(tmp)
	if len(qemu) == 0 {
		t.Fatal("no QEMU process found for the run (looked for a qemu-system-x86_64 whose command line names the run's temp folder)")
	}
	folders := runFolders(t, tmp)
	if len(folders) != 1 {
		t.Fatalf("want one temp folder of the running VM, got %v", folders)
	}
	size := duBytes(folders[0])

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	cmd.Wait()
	for len(qemuOf(tmp)) > 0 {
		if time.Since(killed) > 10*time.Second {
			t.Fatalf("QEMU %v still runs 10s after its parent was killed", qemuOf(tmp))
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("QEMU (pid %v) gone %v after SIGKILL to proxysim", qemu, time.Since(killed).Round(time.Millisecond))
	if left := runFolders(t, tmp); len(left) != 1 {
		t.Fatalf("the killed run's temp folder should be left for the sweep, got %v", left)
	}
	t.Logf("the killed run left %s (%.1f MB)", filepath.Base(folders[0]), float64(size)/1e6)

	// The next run sweeps it, and cleans up after itself.
	next := exec.Command(proxysim, "vm", sleeper, "0s")
	next.Dir = root
	next.Env = cmd.Env
	again := time.Now()
	b, err := next.CombinedOutput()
	if err != nil {
		t.Fatalf("next run: %v\n%s", err, b)
	}
	if !strings.Contains(string(b), "vm: removed "+folders[0]) {
		t.Errorf("the next run did not report sweeping %s:\n%s", folders[0], b)
	}
	if left := runFolders(t, tmp); len(left) != 0 {
		t.Fatalf("temp folders left after the next run: %v", left)
	}
	t.Logf("next run swept it and left nothing, in %v; whole test %v", time.Since(again).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// needVM skips when QEMU or the kernel cache is missing. Under vmRequired a
// missing QEMU fails the test, and a missing cache is fetched by the run.
func needVM(t *testing.T, root string) {
	t.Helper()
	required := os.Getenv(vmRequired) != ""
	if !required && testing.Short() {
		t.Skip("boots a VM; not in -short mode")
	}
	if err := vm.CheckHost(); err != nil {
		if required {
			t.Fatal(err)
		}
		t.Skip("needs QEMU: run `make vm-kill-test` (or `make e2e-vm` once): ", err)
	}
	if m, _ := filepath.Glob(filepath.Join(root, ".cache", "vm", "linux-image-*", "base.cpio.gz")); len(m) == 0 && !required {
		t.Skip("needs the VM's kernel cache in .cache/vm: run `make vm-kill-test` (or `make e2e-vm` once)")
	}
}

func buildStatic(t *testing.T, dir, name, pkg string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	build := exec.Command("go", "build", "-o", out, pkg)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// qemuOf lists the live QEMU processes whose command line names a path under
// tmp (the initrd in the run's temp folder). A zombie has no command line.
func qemuOf(tmp string) []int {
	var pids []int
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if strings.HasSuffix(args[0], "qemu-system-x86_64") && strings.Contains(string(b), tmp+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

func runFolders(t *testing.T, tmp string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(tmp, vm.WorkPrefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func duBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
