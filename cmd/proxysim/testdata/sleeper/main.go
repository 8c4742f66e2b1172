// Command sleeper is the kill test's guest: it says it runs, then sleeps for
// its argument, so the VM is busy when the test kills `proxysim vm`.
package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	d, err := time.ParseDuration(os.Args[1])
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	fmt.Println("sleeper: sleeping", d)
	time.Sleep(d)
	fmt.Println("sleeper: done")
}
