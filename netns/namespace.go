package netns

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	vnetns "github.com/vishvananda/netns"
)

// Prefix names every namespace proxysim creates.
const Prefix = "proxysim-"

// runDir is where named namespaces are bind-mounted (iproute2's convention).
const runDir = "/var/run/netns"

// Namespace is one throwaway network namespace.
type Namespace struct {
	Name   string
	handle vnetns.NsHandle
	// anonymous: the name is gone, the handle alone keeps it alive.
	anonymous bool
}

// Path is the namespace's file, for APIs that take one.
func (n *Namespace) Path() string { return filepath.Join(runDir, n.Name) }

// Handle is the namespace's file descriptor.
func (n *Namespace) Handle() vnetns.NsHandle { return n.handle }

// Create makes a new named namespace (Prefix + role + this process's ID +
// random suffix) with its loopback up. The calling goroutine's namespace is
// unchanged.
func Create(role string) (*Namespace, error) {
	var suffix [4]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%s%s-%d-%s", Prefix, role, os.Getpid(), hex.EncodeToString(suffix[:]))
	var h vnetns.NsHandle
	err := onFreshThread(func() error {
		var err error
		h, err = vnetns.NewNamed(name) // switches this thread into it
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create namespace %s: %w", name, err)
	}
	n := &Namespace{Name: name, handle: h}
	if err := n.linkUp("lo"); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// New creates a namespace for a test and removes it when the test ends,
// whether it passes, fails or panics.
func New(t testing.TB, role string) *Namespace {
	t.Helper()
	n, err := Create(role)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// Do runs f with the calling code's network namespace set to n, on a
// dedicated OS thread. Sockets opened inside f stay in n after Do returns.
func (n *Namespace) Do(f func() error) error {
	return onFreshThread(func() error {
		if err := vnetns.Set(n.handle); err != nil {
			return fmt.Errorf("enter %s: %w", n.Name, err)
		}
		return f()
	})
}

// onFreshThread runs f on a locked OS thread in a new goroutine and puts the
// thread back in its original namespace; a thread that cannot be restored is
// never unlocked, so Go retires it with the goroutine.
func onFreshThread(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		ferr := f()
		if err := vnetns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("restore namespace: %w", err))
			return // thread stays locked and dies with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// CreateAnonymous is Create without a name left behind: the bind mount is
// removed at once, so the namespace lives only as long as this process
// holds its handle (and its children run in it). A SIGKILL then takes the
// namespace and its tables with it: nothing is left for Sweep. Its Path is
// gone, so IPVS (which opens the path) cannot use it.
func CreateAnonymous(role string) (*Namespace, error) {
	n, err := Create(role)
	if err != nil {
		return nil, err
	}
	if err := vnetns.DeleteNamed(n.Name); err != nil {
		n.Close()
		return nil, fmt.Errorf("unname namespace %s: %w", n.Name, err)
	}
	n.anonymous = true
	return n, nil
}

// Close deletes the namespace; links, addresses and IPVS state inside it go
// with it.
func (n *Namespace) Close() error {
	n.handle.Close()
	if n.anonymous {
		return nil
	}
	return vnetns.DeleteNamed(n.Name)
}

// Sweep removes every namespace a previous run left behind (recognised by
// Prefix) and reports their names. Namespaces of another process that is
// still running are its own and stay: runs may overlap on one host.
func Sweep() ([]string, error) {
	entries, err := os.ReadDir(runDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), Prefix) || ownedByAnotherLiveProcess(e.Name()) {
			continue
		}
		if err := vnetns.DeleteNamed(e.Name()); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, e.Name())
	}
	return removed, errors.Join(errs...)
}

// ownedByAnotherLiveProcess reads the process ID in a namespace's name
// (see Create) and reports whether that process is another one, alive.
func ownedByAnotherLiveProcess(name string) bool {
	f := strings.Split(name, "-")
	if len(f) < 3 {
		return false
	}
	pid, err := strconv.Atoi(f[len(f)-2])
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	err = syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Privileged reports whether this process can create network namespaces.
func Privileged() bool { return os.Geteuid() == 0 }
