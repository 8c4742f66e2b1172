package sim

import "k8s.io/client-go/kubernetes"

// Clientset returns a client of the world's API server for code that is not
// one of the world's consumers: a service proxy written by someone else,
// run beside the world (see scenarios/bubble). Its List and Watch see
// every object the world writes, as they are written; its informers run on
// their own goroutines, outside the world's barrier, so the world does not
// wait for them. Writes through it reach the API server without the
// world's bookkeeping (no resourceVersion stamping, no trace): it is meant
// for readers.
func (w *World) Clientset() kubernetes.Interface { return w.store.clientset(false, nil) }
