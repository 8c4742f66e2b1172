package netns

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	vnetns "github.com/vishvananda/netns"
)

// runIn executes bin with args inside the namespace, with stdin and extra
// environment, and returns what it printed. It refuses to run anywhere but
// in n: the host's own tables must never be what a command changes. The
// child is forked from the locked thread Do entered n on, and is killed
// with that thread, which this goroutine holds until the child is reaped:
// a killed proxysim leaves no restore or nft running.
func (n *Namespace) runIn(bin string, args []string, stdin string, env ...string) (stdout, stderr string, err error) {
	var out, errb bytes.Buffer
	err = n.Do(func() error {
		cur, err := vnetns.Get()
		if err != nil {
			return err
		}
		here := cur.Equal(n.handle)
		cur.Close()
		if !here {
			return fmt.Errorf("refusing to run %s outside namespace %s", bin, n.Name)
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Stdout, cmd.Stderr = &out, &errb
		return cmd.Run()
	})
	return out.String(), errb.String(), err
}

// failure is a tool's error as a person reads it: what it printed on
// stderr, or how it ended when it printed nothing.
func failure(stderr string, err error) string {
	if msg := strings.TrimSpace(stderr); msg != "" {
		return msg
	}
	return err.Error()
}
