package sim

import "sync"

// ArmedFailures counts the failures armed for a dataplane's next writes
// (a failNext step). A bubble replay arms them on the replay's goroutine
// and the proxy under test takes them on its own, hence the lock.
type ArmedFailures struct {
	mu sync.Mutex
	n  int
}

// Add arms n more failures.
func (a *ArmedFailures) Add(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n += n
}

// Set arms exactly n failures, replacing any left.
func (a *ArmedFailures) Set(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n = n
}

// Take uses up one armed failure, if any is left.
func (a *ArmedFailures) Take() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n > 0 {
		a.n--
		return true
	}
	return false
}
