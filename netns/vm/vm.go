// Package vm boots Debian's cloud kernel under QEMU with a minimal initramfs
// and runs one static binary in it: the privileged suite's way to real IPVS
// on a host whose kernel has none.
//
// The kernel comes from Debian's archive (apt-get download, unpacked with
// dpkg-deb, never installed), and is cached with the base initramfs (busybox,
// the IPVS, conntrack, dummy, veth, x_tables and ipset modules, the host's
// iptables-legacy and ipset with their libraries, /init); each run appends a
// small archive with the binary and the Files copied in. The binary's exit
// code comes back through a marker line on the serial console.
//
// A run leaves nothing behind, even when killed: QEMU gets SIGKILL when its
// parent dies, and a run's temp folder (named WorkPrefix + PID, locked while
// the run lives) is removed by the next run's Sweep. The package runs any
// static binary: it must not know what the binary or its files are for.
package vm

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/proxysim/proxysim/netns/workdir"
)

// Markers the VM's /init prints on the console.
const (
	kernelMarker = "PROXYSIM-KERNEL "
	exitMarker   = "PROXYSIM-EXIT "
)

// Modules loaded at boot, in dependency order (dummy without its default
// dummy0): IPVS and its schedulers, then what the ipsets and iptables rules
// of kube-proxy's IPVS mode need through iptables' legacy backend (x_tables
// matches and targets, ipset types), so that a guest can hold the whole
// packet path of that mode.
var modules = []string{"ip_vs", "ip_vs_rr", "ip_vs_wrr", "ip_vs_sh", "dummy", "veth",
	"ip_tables", "iptable_filter", "iptable_nat", "xt_tcpudp", "xt_comment", "xt_mark", "xt_addrtype",
	"xt_conntrack", "xt_MASQUERADE", "ipt_REJECT", "xt_ipvs", "xt_set", "ip_set_hash_ip",
	"ip_set_hash_ipport", "ip_set_hash_ipportip", "ip_set_hash_ipportnet", "ip_set_bitmap_port"}

// hostTools are the host's user-space tools copied into the guest at their
// own paths, with the shared libraries they load (iptables' extensions
// folder whole): iptables' legacy multi-binary and ipset, which program
// that packet path. They come from Debian's iptables and ipset packages
// (netns/vm/deps.sh installs them).
var hostTools = []string{"/usr/sbin/xtables-legacy-multi", "/usr/sbin/ipset"}

// hostToolFiles are what those tools read besides libraries: protocol
// and service names, and iptables' extensions.
var hostToolFiles = []string{"/etc/protocols", "/etc/services", "/usr/lib/x86_64-linux-gnu/xtables"}

// baseName names the cached base initramfs; a new name when what the base
// holds changes, so that caches built before are not reused.
const baseName = "base-netfilter.cpio.gz"

// Config tunes a run.
type Config struct {
	// CacheDir holds kernels and base initramfs images (default .cache/vm).
	CacheDir string
	// Timeout bounds the whole VM run (default 10m).
	Timeout time.Duration
	// Memory for the guest (default 1024M).
	Memory string
	// Console receives the guest's console output as it arrives.
	Console io.Writer
	// CPU is QEMU's CPU model (default max).
	CPU string
	// Release is the Debian release whose cloud kernel to boot: "" uses the
	// host's own apt configuration (bookworm here); another release
	// (bullseye, trixie) gets a private apt configuration in the cache that
	// points at the host's own mirror, leaving the host's sources untouched.
	Release string
}

// Result is what a run produced.
type Result struct {
	ExitCode int
	Kernel   string // the guest's uname -r
}

// ErrNoMarker means the guest ended without reporting an exit code (it
// crashed or the binary killed it); ErrTimeout that it ran out of time.
var (
	ErrNoMarker = errors.New("the VM stopped without an exit marker")
	ErrTimeout  = errors.New("the VM run timed out")
)

// Tools the runner needs on the host, and the Debian packages that have them.
var tools = map[string]string{
	"qemu-system-x86_64": "qemu-system-x86",
	"cpio":               "cpio",
	"depmod":             "kmod",
	"modprobe":           "kmod",
	"apt-get":            "apt",
	"dpkg-deb":           "dpkg",
}

// CheckHost reports what the host lacks to run the VM.
func CheckHost() error {
	var missing []string
	for t, pkg := range tools {
		if _, err := exec.LookPath(t); err != nil && !slices.Contains(missing, pkg) {
			missing = append(missing, pkg)
		}
	}
	slices.Sort(missing)
	if _, err := os.Stat("/bin/busybox"); err != nil {
		missing = append(missing, "busybox-static")
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing host packages %v: install them (sudo apt-get install %s); run `proxysim doctor` to see what else this machine lacks", missing, strings.Join(missing, " "))
	}
	return nil
}

// IsStatic reports whether an executable has no ELF interpreter, as the
// initramfs has no libc.
func IsStatic(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

// Run boots the VM, runs binary with args inside it as root (working
// directory /, with files copied in; nil copies none), and returns its exit
// code.
func Run(ctx context.Context, cfg Config, binary string, args []string, files *Files) (Result, error) {
	if cfg.CacheDir == "" {
		cfg.CacheDir = filepath.Join(".cache", "vm")
	}
	if abs, err := filepath.Abs(cfg.CacheDir); err == nil {
		cfg.CacheDir = abs
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Minute
	}
	if cfg.Memory == "" {
		cfg.Memory = "1024M"
	}
	if cfg.CPU == "" {
		cfg.CPU = "max"
	}
	if cfg.Console == nil {
		cfg.Console = io.Discard
	}
	if err := CheckHost(); err != nil {
		return Result{}, err
	}
	if ok, err := IsStatic(binary); err != nil || !ok {
		return Result{}, fmt.Errorf("%s must be a static binary (build it with CGO_ENABLED=0): %v", binary, err)
	}
	apt, err := aptFor(ctx, cfg.CacheDir, cfg.Release)
	if err != nil {
		return Result{}, err
	}
	k, err := ensureKernel(ctx, cfg.CacheDir, apt)
	if err != nil {
		return Result{}, err
	}
	// A run killed before it could clean up left its temp folder (the
	// initrd, ~100 MB); the next run removes it.
	removed, err := Sweep()
	for _, dir := range removed {
		fmt.Fprintf(cfg.Console, "vm: removed %s, left by a killed run\n", dir)
	}
	if err != nil {
		fmt.Fprintf(cfg.Console, "vm: sweeping stale temp folders: %v\n", err)
	}
	work, err := workdir.New(WorkPrefix)
	if err != nil {
		return Result{}, err
	}
	defer work.Close()
	base, err := ensureBase(k, filepath.Join(work.Path, "base"))
	if err != nil {
		return Result{}, err
	}
	copies := map[string]string{"proxysim-run": binary}
	if files != nil {
		for dst, src := range files.copies {
			copies[dst] = src
		}
	}
	run, err := archive(filepath.Join(work.Path, "run"), copies, map[string]string{"args": strings.Join(args, "\n") + "\n"})
	if err != nil {
		return Result{}, err
	}
	initrd := filepath.Join(work.Path, "initrd")
	if err := concat(initrd, base, run); err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64",
		"-accel", "tcg", "-cpu", cfg.CPU, "-m", cfg.Memory, "-smp", "1",
		"-nographic", "-monitor", "none", "-no-reboot", "-nic", "none",
		"-kernel", k.vmlinuz, "-initrd", initrd,
		// no_timer_check: under software emulation on a busy host the
		// kernel's boot-time check of the timer interrupt can miss its
		// window and panic ("IO-APIC + timer doesn't work!", seen in a
		// run here); the check is for broken hardware, not for QEMU.
		"-append", "console=ttyS0 panic=-1 quiet no_timer_check")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return Result{}, err
	}
	cmd.Stderr = cmd.Stdout
	waited := make(chan struct{})
	defer close(waited) // after cmd.Wait: QEMU is gone
	if err := startDyingWithParent(cmd, waited); err != nil {
		return Result{}, fmt.Errorf("start qemu: %w", err)
	}
	// Only the binary's own output (between the markers) goes to Console;
	// the boot chatter is kept for the error when no marker comes.
	res := Result{ExitCode: -1}
	var boot []string
	running := false
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		// the console may prefix a marker with terminal escapes
		switch {
		case strings.Contains(line, kernelMarker):
			res.Kernel = strings.TrimSpace(line[strings.Index(line, kernelMarker)+len(kernelMarker):])
			running = true
		case strings.Contains(line, exitMarker):
			res.ExitCode, _ = strconv.Atoi(strings.TrimSpace(line[strings.Index(line, exitMarker)+len(exitMarker):]))
			running = false
		case running:
			fmt.Fprintln(cfg.Console, line)
		default:
			boot = append(boot, line)
			if len(boot) > 40 {
				boot = boot[1:]
			}
		}
	}
	werr := cmd.Wait()
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return res, ErrTimeout
	case ctx.Err() != nil:
		return res, fmt.Errorf("the VM run was stopped: %w", ctx.Err())
	case res.ExitCode < 0:
		return res, fmt.Errorf("%w (qemu: %v); last console lines:\n%s", ErrNoMarker, werr, strings.Join(boot, "\n"))
	}
	return res, nil
}

// startDyingWithParent starts cmd so that the kernel SIGKILLs it when this
// process dies, however it dies (a killed `proxysim vm` must not leave QEMU
// spinning until its timeout).
func startDyingWithParent(cmd *exec.Cmd, waited <-chan struct{}) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the forking *thread* exits, and Go may end a
		// thread; a locked thread held until QEMU is waited for cannot be.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := cmd.Start()
		started <- err
		if err == nil {
			<-waited
		}
	}()
	return <-started
}

// aptFor returns the options that point apt-get and apt-cache at a release:
// none for the host's own; for another, a private configuration (sources,
// lists, cache) under cache/apt/<release>, updated once, that reuses the
// mirror and keyring of the host's own Debian sources.
func aptFor(ctx context.Context, cache, release string) ([]string, error) {
	if release == "" {
		return nil, nil
	}
	uri, keyring, err := hostMirror()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cache, "apt", release)
	lists := filepath.Join(dir, "lists")
	for _, d := range []string{filepath.Join(lists, "partial"), filepath.Join(dir, "cache", "archives", "partial"), filepath.Join(dir, "parts")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	// A real machine of the release takes its kernel from the newest of
	// the release, its -updates and its -security suites (trixie's main
	// suite kernel 6.12.107 double-faults under TCG; trixie-security's boots).
	src := filepath.Join(dir, "sources.list")
	lines := fmt.Sprintf("deb [signed-by=%s] %s %s main\ndeb [signed-by=%s] %s %s-updates main\ndeb [signed-by=%s] %s %s-security main\n",
		keyring, uri, release, keyring, uri, release, keyring, securityMirror(), release)
	old, _ := os.ReadFile(src)
	changed := string(old) != lines
	if changed {
		if err := os.WriteFile(src, []byte(lines), 0o644); err != nil {
			return nil, err
		}
	}
	opts := []string{
		"-o", "Dir::Etc::SourceList=" + src,
		"-o", "Dir::Etc::SourceParts=" + filepath.Join(dir, "parts"),
		"-o", "Dir::State::Lists=" + lists,
		"-o", "Dir::Cache=" + filepath.Join(dir, "cache"),
	}
	if m, _ := filepath.Glob(filepath.Join(lists, "*Packages*")); len(m) == 0 || changed {
		if b, err := exec.CommandContext(ctx, "apt-get", append(opts, "update")...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("apt-get update for %s: %v\n%s", release, err, b)
		}
	}
	return opts, nil
}

// securityMirror is the host's Debian security archive (its apt sources
// stanza or line for a -security suite), or Debian's own.
func securityMirror() string {
	files, _ := filepath.Glob("/etc/apt/sources.list.d/*.sources")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, stanza := range strings.Split(string(b), "\n\n") {
			var u, suites string
			for _, l := range strings.Split(stanza, "\n") {
				k, v, ok := strings.Cut(l, ":")
				if !ok || strings.HasPrefix(l, "#") {
					continue
				}
				switch strings.TrimSpace(k) {
				case "URIs":
					u = strings.Fields(v)[0]
				case "Suites":
					suites = v
				}
			}
			if u != "" && strings.Contains(suites, "-security") {
				return u
			}
		}
	}
	if b, err := os.ReadFile("/etc/apt/sources.list"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) >= 3 && f[0] == "deb" && strings.Contains(l, "-security") {
				for _, w := range f[1:] {
					if strings.HasPrefix(w, "http") {
						return w
					}
				}
			}
		}
	}
	return "http://deb.debian.org/debian-security"
}

// hostMirror finds the Debian mirror and keyring of the host's apt sources
// (deb822 .sources files or sources.list).
func hostMirror() (uri, keyring string, err error) {
	keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
	files, _ := filepath.Glob("/etc/apt/sources.list.d/*.sources")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, stanza := range strings.Split(string(b), "\n\n") {
			var u, suites, key string
			for _, l := range strings.Split(stanza, "\n") {
				k, v, ok := strings.Cut(l, ":")
				if !ok || strings.HasPrefix(l, "#") {
					continue
				}
				switch strings.TrimSpace(k) {
				case "URIs":
					u = strings.Fields(v)[0]
				case "Suites":
					suites = v
				case "Signed-By":
					key = strings.TrimSpace(v)
				}
			}
			if u != "" && !strings.Contains(suites, "security") {
				if key != "" {
					keyring = key
				}
				return u, keyring, nil
			}
		}
	}
	if b, err := os.ReadFile("/etc/apt/sources.list"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) >= 3 && f[0] == "deb" && !strings.Contains(l, "security") {
				i := 1
				if strings.HasPrefix(f[1], "[") {
					for i < len(f) && !strings.HasSuffix(f[i], "]") {
						i++
					}
					i++
				}
				if i < len(f) {
					return f[i], keyring, nil
				}
			}
		}
	}
	return "", "", errors.New("cannot find the host's Debian mirror in its apt sources")
}

type kernel struct {
	dir, version, vmlinuz string
}

// ensureKernel downloads and unpacks the current cloud kernel of the release
// that the apt options resolve (the host's own, or Options.Release's) into
// the cache, once.
func ensureKernel(ctx context.Context, cache string, apt []string) (kernel, error) {
	out, err := exec.CommandContext(ctx, "apt-cache", append(apt, "depends", "linux-image-cloud-amd64")...).Output()
	if err != nil {
		return kernel{}, fmt.Errorf("apt-cache depends linux-image-cloud-amd64 (run apt-get update?): %w", err)
	}
	var pkg string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "Depends:" && strings.HasPrefix(f[1], "linux-image-") {
			pkg = f[1]
			break
		}
	}
	if pkg == "" {
		return kernel{}, fmt.Errorf("cannot resolve linux-image-cloud-amd64 to a kernel package")
	}
	k := kernel{dir: filepath.Join(cache, pkg), version: strings.TrimPrefix(pkg, "linux-image-")}
	k.vmlinuz = filepath.Join(k.dir, "root", "boot", "vmlinuz-"+k.version)
	if _, err := os.Stat(k.vmlinuz); err == nil {
		return k, nil
	}
	tmp := k.dir + ".tmp"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return kernel{}, err
	}
	dl := exec.CommandContext(ctx, "apt-get", append(apt, "download", pkg)...)
	dl.Dir = tmp
	if b, err := dl.CombinedOutput(); err != nil {
		return kernel{}, fmt.Errorf("apt-get download %s: %v\n%s", pkg, err, b)
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 1 {
		return kernel{}, fmt.Errorf("apt-get download %s: no package file", pkg)
	}
	if b, err := exec.CommandContext(ctx, "dpkg-deb", "-x", debs[0], filepath.Join(tmp, "root")).CombinedOutput(); err != nil {
		return kernel{}, fmt.Errorf("dpkg-deb -x: %v\n%s", err, b)
	}
	os.Remove(debs[0])
	os.RemoveAll(k.dir)
	if err := os.Rename(tmp, k.dir); err != nil {
		return kernel{}, err
	}
	return k, nil
}

// moduleRoot is where a kernel package keeps its modules: lib/ or, merged,
// usr/lib/.
func (k kernel) moduleRoot() string {
	for _, r := range []string{filepath.Join(k.dir, "root"), filepath.Join(k.dir, "root", "usr")} {
		if _, err := os.Stat(filepath.Join(r, "lib", "modules", k.version)); err == nil {
			return r
		}
	}
	return filepath.Join(k.dir, "root")
}

const initScript = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
mkdir -p /proc /sys /dev /tmp /run /var
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
ln -s /run /var/run
while read -r mod args; do insmod "$mod" $args; done < /modules.list
ip link set lo up
export LD_LIBRARY_PATH=/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu
echo "PROXYSIM-KERNEL $(uname -r)"
cd /
set -- $(cat /args)
/proxysim-run "$@"
echo "PROXYSIM-EXIT $?"
poweroff -f
`

// ensureBase builds the cached base initramfs (busybox, /init, the modules
// and their dependency files), staged in the folder stage.
func ensureBase(k kernel, stage string) (string, error) {
	out := filepath.Join(k.dir, baseName)
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	root := k.moduleRoot()
	if b, err := exec.Command("depmod", "-b", root, k.version).CombinedOutput(); err != nil {
		return "", fmt.Errorf("depmod: %v\n%s", err, b)
	}
	var list bytes.Buffer
	seen := map[string]bool{}
	for _, m := range modules {
		b, err := exec.Command("modprobe", "-d", root, "-S", k.version, "--show-depends", m).Output()
		if err != nil {
			return "", fmt.Errorf("modprobe --show-depends %s: %w", m, err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 || f[0] != "insmod" || seen[f[1]] {
				continue
			}
			seen[f[1]] = true
			rel, err := filepath.Rel(root, f[1])
			if err != nil {
				return "", err
			}
			dst := filepath.Join(stage, decompressedName(rel))
			if err := copyModule(f[1], dst); err != nil {
				return "", err
			}
			fmt.Fprintf(&list, "/%s %s\n", decompressedName(rel), strings.Join(f[2:], " "))
		}
	}
	files := map[string]string{"bin/busybox": "/bin/busybox"}
	if err := addHostTools(files); err != nil {
		return "", err
	}
	data := map[string]string{"init": initScript, "modules.list": list.String()}
	arch, err := archive(stage, files, data)
	if err != nil {
		return "", err
	}
	if err := os.Rename(arch, out); err != nil {
		return "", err
	}
	return out, nil
}

// addHostTools adds hostTools, hostToolFiles and every shared library
// they load (as ldd resolves them on the host, at the same paths) to files
// (guest path -> host file).
func addHostTools(files map[string]string) error {
	var elfs []string
	for _, t := range hostTools {
		if _, err := os.Stat(t); err != nil {
			return fmt.Errorf("%s is missing on the host (Debian's packages iptables and ipset have it; run netns/vm/deps.sh)", t)
		}
		files[strings.TrimPrefix(t, "/")] = t
		elfs = append(elfs, t)
	}
	for _, f := range hostToolFiles {
		err := filepath.Walk(f, func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return err
			}
			files[strings.TrimPrefix(p, "/")] = p
			if strings.HasSuffix(p, ".so") {
				elfs = append(elfs, p)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("copying %s into the guest: %w", f, err)
		}
	}
	out, err := exec.Command("ldd", elfs...).Output()
	if err != nil {
		return fmt.Errorf("ldd %v: %w", hostTools, err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		for _, f := range strings.Fields(l) {
			if strings.HasPrefix(f, "/") && !strings.HasSuffix(f, ":") {
				files[strings.TrimPrefix(f, "/")] = f
			}
		}
	}
	return nil
}

// decompressedName drops .xz or .zst: modules are unpacked on the host.
func decompressedName(p string) string {
	for _, ext := range []string{".xz", ".zst"} {
		if strings.HasSuffix(p, ext) {
			return strings.TrimSuffix(p, ext)
		}
	}
	return p
}

func copyModule(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	var cmd *exec.Cmd
	switch {
	case strings.HasSuffix(src, ".xz"):
		cmd = exec.Command("xz", "-dc", src)
	case strings.HasSuffix(src, ".zst"):
		cmd = exec.Command("zstd", "-dc", src)
	default:
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	}
	b, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("decompress %s: %w", src, err)
	}
	return os.WriteFile(dst, b, 0o644)
}

// archive writes a gzipped newc cpio of files (dst path -> host file) and
// data (dst path -> content) staged under dir, and returns its path.
func archive(dir string, files, data map[string]string) (string, error) {
	stage := filepath.Join(dir, "stage")
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return "", err
	}
	// modules already staged under dir belong in the archive too
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() == "stage" || !e.IsDir() {
			continue
		}
		if err := os.Rename(filepath.Join(dir, e.Name()), filepath.Join(stage, e.Name())); err != nil {
			return "", err
		}
	}
	for dst, src := range files {
		b, err := os.ReadFile(src)
		if err != nil {
			return "", err
		}
		p := filepath.Join(stage, dst)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, b, 0o755); err != nil {
			return "", err
		}
	}
	for dst, content := range data {
		if err := os.WriteFile(filepath.Join(stage, dst), []byte(content), 0o755); err != nil {
			return "", err
		}
	}
	var list bytes.Buffer
	err := filepath.Walk(stage, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(stage, p)
		if rel != "." {
			list.WriteString(rel + "\n")
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	cpio := exec.Command("cpio", "--quiet", "-o", "-H", "newc")
	cpio.Dir = stage
	cpio.Stdin = &list
	raw, err := cpio.Output()
	if err != nil {
		return "", fmt.Errorf("cpio: %w", err)
	}
	out := filepath.Join(dir, "archive.cpio.gz")
	f, err := os.Create(out)
	if err != nil {
		return "", err
	}
	zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	if _, err := zw.Write(raw); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return out, f.Close()
}

func concat(dst string, parts ...string) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range parts {
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, in)
		in.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
