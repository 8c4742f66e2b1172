// Package ingress models the sync loop of the ingress-nginx controller, as
// its public source has it at tag controller-v1.15.1 (kubernetes/ingress-nginx,
// commit 0a5901f3c64f), as a consumer of proxysim's world, in virtual time.
//
// The pieces, each after the upstream file and function named where it is
// built: the store's event filters (internal/ingress/controller/store/store.go,
// New and its handlers), the ring channel between the store and the main
// loop (eapache/channels RingChannel, made in nginx.go NewNGINXController),
// the task queue and its skip rule (internal/task/queue.go), the token bucket
// in front of every sync (controller.go syncIngress, on
// k8s.io/client-go/util/flowcontrol), the configuration build, its comparison
// with the running one and the reload-or-dynamic decision
// (pkg/util/ingress IsDynamicConfigurationEnough), a reload whose cost is
// modelled and which can fail, the dynamic update with its backoff
// (configureDynamically), and the Lua balancer's once-a-second pick-up of
// the posted backends (rootfs/etc/nginx/lua/balancer.lua sync_backends).
//
// No real nginx runs: a reload is a modelled cost and an outcome, and
// "routes to an endpoint" means the modelled Lua worker holds it in the
// backend of that host and path. The package never reads the wall clock,
// sleeps or starts a goroutine: every wait is a timer on the world's clock.
package ingress
