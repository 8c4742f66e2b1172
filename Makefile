# proxysim: see README.md. Every target is plain `go` underneath.
GO      ?= go
PKGS    ?= ./...
FUZZTIME ?= 20s
# The README's sweep; cmd/proxysim's TestSweepExamplePlotIsCurrent reads it from here.
# The README's default-profile sweep; cmd/proxysim's TestSweepPlotIsCurrent reads it from here.
SWEEP_PLOT = docs/sweep-default-profile.yaml --set cluster.generate.services=1000,5000,10000,20000 --set proxy.mode=iptables,nftables --set proxy.minSyncPeriod=0s,1s,10s --plot-metric syncP50,syncMax,p99,syncCPU
SWEEP_EXAMPLE = rolling-update-batch-1s --set controllers.endpointSlice.batchPeriod=0s,500ms,1s,2s,5s --set proxy.minSyncPeriod=1s,10s --set proxy.version=v1.33.0,v1.34.0 --plot-metric max

.PHONY: all test race vet bench demo junit fuzz fuzz-fast upstream upstream-nftables upstream-ipvs-vm upstream-bubble build e2e-vm e2e-vm-matrix vm-kill-test e2e-netns e2e-host e2e-browser ci sweep-example ci-recipe

all: vet test

## test: every unit test, and every bundled scenario as a ginkgo spec
test:
	$(GO) test -timeout 30m $(PKGS)

## race: the same under the race detector
race:
	$(GO) test -race $(PKGS)

vet:
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi

## bench: the engine's speed and memory targets
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

## cluster-5000: issue 25's scale run on demand (not in `go test ./...`):
## 5,000 nodes, 10,000 Services of 15 pods, 20 pod changes/s for
## CLUSTER_MINUTES virtual minutes (default 60), each mode in its own
## process; it prints x-cputime and peak-rss-MiB (docs/cluster.md). CLUSTER_GOMEMLIMIT is Go's
## soft memory limit for the run (default 7GiB: the hour peaks at 7.0 GB with it, 7.7-8.2 GB
## without; CLUSTER_GOMEMLIMIT=off measures without)
CLUSTER_MINUTES ?= 60
CLUSTER_GOMEMLIMIT ?= 7GiB
.PHONY: cluster-5000
cluster-5000:
	for m in iptables nftables; do \
		GOMEMLIMIT=$(CLUSTER_GOMEMLIMIT) PROXYSIM_BENCH_NODES=5000 PROXYSIM_BENCH_CLUSTER_SERVICES=10000 PROXYSIM_BENCH_PODS=15 PROXYSIM_BENCH_RATE=20 \
		PROXYSIM_BENCH_MINUTES=$(CLUSTER_MINUTES) $(GO) test -run '^$$' -bench "BenchmarkClusterHour/$$m" -benchtime 1x -benchmem -timeout 0 ./scenarios/ || exit 1; \
	done

## cl2-load-5000: the library's ClusterLoader2 load test at 5,000 nodes on demand (tagged large, so
## no test replays it): replays it and prints the SLI, the true pod latency and the slowest nodes
## (docs/cluster.md, "Workloads"); CL2_MAX_EVENTS and CL2_MAX_MEMORY (MiB of heap; the replay's default,
## and a larger one lets the collector wait longer: 8192 peaked at 3.9 GB RSS) set the replay's budget
CL2_MAX_EVENTS ?= 5000000
CL2_MAX_MEMORY ?= 3072
.PHONY: cl2-load-5000
cl2-load-5000:
	$(GO) run ./cmd/proxysim replay cl2-load-5000 --max-events $(CL2_MAX_EVENTS) --max-memory $(CL2_MAX_MEMORY)

## demo: replay two bundled scenarios, with their traces, on the fake dataplane
demo:
	$(GO) run ./cmd/proxysim replay -v burst-then-throttle-v1.33 cooldown-v1.34

## junit: the e2e suite as a JUnit report (junit-e2e.xml); kernel halves skip unprivileged
junit:
	$(GO) test ./e2e -ginkgo.junit-report=$(CURDIR)/junit-e2e.xml

## fuzz: short runs of the loader's, the replay's and the kube-proxy configuration reader's fuzzers
fuzz:
	$(GO) test ./scenarios -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./scenarios -run '^$$' -fuzz '^FuzzReplay$$' -fuzztime $(FUZZTIME)
	$(GO) test ./scenarios -run '^$$' -fuzz '^FuzzKubeProxyConfig$$' -fuzztime $(FUZZTIME)

## fuzz-fast: the fast manifest reader against yaml.v3, and the cut-out
## inline objects against the general path (their findings stay in
## testdata/fuzz, which every `go test` replays)
fuzz-fast:
	$(GO) test ./scenarios -run '^$$' -fuzz '^FuzzFastYAML$$' -fuzztime $(FUZZTIME)
	$(GO) test ./scenarios -run '^$$' -fuzz '^FuzzInlineCut$$' -fuzztime $(FUZZTIME)

## sweep-example: regenerate the README's sweep plot (docs/sweep-example.svg)
sweep-example:
	$(GO) run ./cmd/proxysim sweep $(SWEEP_EXAMPLE) --plot docs/sweep-example.svg >/dev/null

## sweep-plot: the README's sweep under the default cost profile (docs/sweep-default-profile.yaml):
## its table and plot, docs/images/sweep-default-profile.csv and .svg (TestSweepPlotIsCurrent checks them)
.PHONY: sweep-plot
sweep-plot:
	$(GO) run ./cmd/proxysim sweep $(SWEEP_PLOT) -o docs/images/sweep-default-profile.csv --plot docs/images/sweep-default-profile.svg

## cluster-sweep-plot: the README's whole-cluster sweep (docs/sweep-cluster.yaml: ClusterLoader2's load test in small
## over node count × mode × minSyncPeriod): docs/images/sweep-cluster.csv and .svg (TestSweepPlotIsCurrent checks them)
CLUSTER_SWEEP_PLOT = docs/sweep-cluster.yaml --max-events 100000000 --set cluster.pools[0].count=10,100,1000 --set proxy.mode=iptables,nftables --set proxy.minSyncPeriod=0s,1s,10s --plot-metric sliPerc99,podP99,nodeCPU,syncs
.PHONY: cluster-sweep-plot
cluster-sweep-plot:
	$(GO) run ./cmd/proxysim sweep $(CLUSTER_SWEEP_PLOT) -o docs/images/sweep-cluster.csv --plot docs/images/sweep-cluster.svg

## profile-plot: the default cost profile's curves (docs/images/cost-profile-default.svg; TestDefaultProfilePlotIsCurrent checks it)
.PHONY: profile-plot
profile-plot:
	$(GO) test ./sim/costprofile -run '^TestDefaultProfilePlotIsCurrent$$' -count=1 -update-plot

## build: a static proxysim (what --dataplane vm needs)
build:
	CGO_ENABLED=0 $(GO) build -o bin/proxysim ./cmd/proxysim

## e2e-vm: the privileged suite in a QEMU VM with Debian's cloud kernel
## (VM_RELEASE=bullseye or trixie for another release's kernel)
e2e-vm: build
	bash netns/vm/deps.sh
	CGO_ENABLED=0 $(GO) test -c -o bin/e2e.test ./e2e
	bin/proxysim vm --release "$(VM_RELEASE)" bin/e2e.test -test.v -ginkgo.label-filter=kernel -ginkgo.v

## e2e-vm-matrix: the kernel suite (label kernel) on the cloud kernels of
## bullseye (5.10), bookworm (6.1) and trixie (6.12), each resolved with its
## release's -updates and -security suites; prints each kernel's time and
## fails, after running all, if any failed
VM_RELEASES ?= bullseye bookworm trixie
e2e-vm-matrix: build
	bash netns/vm/deps.sh
	CGO_ENABLED=0 $(GO) test -c -o bin/e2e.test ./e2e
	@failed=""; total=0; for r in $(VM_RELEASES); do \
	  echo "== kernel suite on $$r's cloud kernel"; start=$$(date +%s); \
	  bin/proxysim vm --timeout 20m --release $$r bin/e2e.test -test.v -ginkgo.label-filter=kernel -ginkgo.v || failed="$$failed $$r"; \
	  t=$$(( $$(date +%s) - start )); total=$$(( total + t )); echo "== $$r: $${t}s"; \
	done; echo "== kernel matrix: $${total}s in all"; \
	if [ -n "$$failed" ]; then echo "== the kernel suite failed on:$$failed"; exit 1; fi

## vm-kill-test: SIGKILL a running `proxysim vm`; its QEMU must die with it and
## the next run must remove its temp folder (fails, never skips, without QEMU)
vm-kill-test:
	bash netns/vm/deps.sh
	PROXYSIM_VM_REQUIRED=1 $(GO) test -count=1 -v -run '^TestKilledVMRunLeavesNoQEMUAndNoTempFolder$$' ./cmd/proxysim

## e2e-netns: the privileged suite directly, on a host with ip_vs, as root
e2e-netns:
	$(GO) test -count=1 -v ./e2e -args -ginkgo.label-filter=kernel -ginkgo.v

## e2e-host: the real-kernel specs that need no ip_vs (label host-kernel):
## iptables (both backends) and nftables on this host's kernel, in throwaway
## namespaces (root; installs the tools; fails, never skips, when it cannot run)
e2e-host:
	@[ "$$(id -u)" = 0 ] || { echo "make e2e-host needs root"; exit 1; }
	bash netns/hostdeps.sh
	PROXYSIM_HOST_KERNEL_REQUIRED=1 $(GO) test -count=1 -timeout 30m -v ./e2e -args -ginkgo.label-filter=host-kernel -ginkgo.v

## e2e-browser: `proxysim report` pages in headless Chromium from Debian's
## archive (installs it; fails, never skips, without it); the pages and
## screenshots are kept in artifacts/
e2e-browser:
	bash scenarios/report/browserdeps.sh
	PROXYSIM_BROWSER_REQUIRED=1 $(GO) test -count=1 -v -run 'Chromium|Screenshot' ./scenarios/report

## upstream: the trackers and the iptables proxier side by side with
## kube-proxy's own (a separate module), kube-proxy's metric definitions, and
## kube-proxy configurations rendered by kubeadm and read by kube-proxy's own
## command against proxysim's reading (kubeproxyconfig); IPT_SEQUENCES defaults to SEQUENCES
upstream:
	cd e2e/upstream && $(GO) test -count=1 -timeout 0 -v -skip 'InBubble|BubbleComparison' . -args -sequences $(SEQUENCES) -ipt-sequences $(IPT_SEQUENCES) -es-sequences $(ES_SEQUENCES)
	cd e2e/upstream && $(GO) test -count=1 -v ./kubeproxyconfig

SEQUENCES ?= 10000
IPT_SEQUENCES ?= $(SEQUENCES)
# EndpointSlice reconciler vs k8s.io/endpointslice: 10,000 sequences of 12
# steps took 2m14s (101s of CPU) on a loaded 2-core machine, 19m16s under a
# load average of 20-28 (hence -timeout 0: go test's default is 10m).
ES_SEQUENCES ?= 10000

## upstream-nftables: kube-proxy v1.36's nftables proxier side by side with proxysim's, each on a
## knftables.Fake (kube-proxy's is constructed in a user+network namespace: needs nft and unshare;
## PROXYSIM_NFTABLES_REQUIRED makes a missing tool or namespace fail the test, never skip it)
upstream-nftables:
	bash netns/hostdeps.sh
	cd e2e/upstream && PROXYSIM_NFTABLES_REQUIRED=1 $(GO) test -count=1 -run TestNFTablesMatchesKubeProxy -v . -args -nft-sequences $(NFT_SEQUENCES) -seed $(SEED)

NFT_SEQUENCES ?= 1000
SEED ?= 1

## upstream-ipvs-vm: kube-proxy v1.36's IPVS proxier side by side with proxysim's on
## the real kernel, each in a network namespace, in one boot of the QEMU VM
upstream-ipvs-vm: build
	bash netns/vm/deps.sh
	cd e2e/upstream && CGO_ENABLED=0 $(GO) test -c -o ../../bin/upstream.test .
	bin/proxysim vm --timeout 30m --release "$(VM_RELEASE)" bin/upstream.test -test.run '^TestIPVSMatchesKubeProxy$$' -test.v -ipvs-sequences $(IPVS_SEQUENCES) -seed $(SEED)

IPVS_SEQUENCES ?= 200

## upstream-bubble: kube-proxy's own code end to end in a testing/synctest bubble against proxysim's
## replay of the same library scenarios: v1.36's iptables, nftables and IPVS proxiers (e2e/upstream), v1.33's
## iptables proxier with the burst runner (e2e/upstream133); BUBBLE_RUNS replays each, GOMAXPROCS 1 and 2
## KUBERNETES=path/to/kubernetes: the v1.36 half against that checkout instead, in a temporary copy of
## e2e/upstream (e2e/with-kubernetes.sh; nothing in the repo changes); the v1.33 half is left out
upstream-bubble:
	bash netns/hostdeps.sh
ifdef KUBERNETES
	bash e2e/with-kubernetes.sh "$(abspath $(KUBERNETES))" e2e/upstream 'for p in 1 2; do PROXYSIM_BUBBLE_REQUIRED=1 GOMAXPROCS=$$p $(GO) test -count=1 -v -run "InBubble|BubbleComparison" . -args -bubble-runs $(BUBBLE_RUNS) || exit 1; done'
else
	cd e2e/upstream && for p in 1 2; do PROXYSIM_BUBBLE_REQUIRED=1 GOMAXPROCS=$$p $(GO) test -count=1 -v -run 'InBubble|BubbleComparison' . -args -bubble-runs $(BUBBLE_RUNS) || exit 1; done
	cd e2e/upstream133 && for p in 1 2; do GOMAXPROCS=$$p $(GO) test -count=1 -v . -args -bubble-runs $(BUBBLE_RUNS) || exit 1; done
endif

BUBBLE_RUNS ?= 5

ci: vet test race fuzz upstream

## ci-recipe: the users' CI recipe (docs/ci/proxysim-ci.sh) on its sample folder
## (docs/ci/sample), with proxysim go-installed outside the repo: the fake
## dataplane; as root, this host's kernel (iptables on both backends,
## nftables); the example proxy's bubble.Replay tests (examples/naiveproxy).
## IPVS is left out unless CI_RECIPE_IPVS=vm (QEMU) or netns (a kernel with
## ip_vs). JUnit reports in artifacts/ci-recipe/.
CI_RECIPE_IPVS ?=
ci-recipe:
	rm -rf artifacts/ci-recipe
	CGO_ENABLED=0 GOBIN=$(CURDIR)/bin/ci-recipe $(GO) install ./cmd/proxysim
	CGO_ENABLED=0 PROXYSIM=$(CURDIR)/bin/ci-recipe/proxysim PROXYSIM_RESULTS=$(CURDIR)/artifacts/ci-recipe \
	PROXYSIM_IPTABLES_BACKENDS="nft legacy" PROXYSIM_GO_PACKAGES=./examples/naiveproxy \
	PROXYSIM_SKIP_NETNS=$$([ "$$(id -u)" = 0 ] || echo 1) \
	PROXYSIM_SKIP_IPVS=$$([ -n "$(CI_RECIPE_IPVS)" ] || echo 1) PROXYSIM_IPVS_DATAPLANE=$(or $(CI_RECIPE_IPVS),vm) \
	bash docs/ci/proxysim-ci.sh docs/ci/sample

## docs: regenerate the generated docs (docs/reference/cli.md from the CLI's
## commands); `go test ./docs` then checks every page's links and commands
.PHONY: docs
docs:
	$(GO) test ./cmd/proxysim -run '^TestCLIReferenceIsCurrent$$' -count=1 -update-docs

.PHONY: realcp
## realcp: kube-proxy v1.36.3's binary (built from e2e/realcp, or KUBE_PROXY=path/to/your/kube-proxy) on a
## real etcd + kube-apiserver started in process, in a throwaway network namespace of this host's kernel
## (iptables through both backends, nftables); library scenarios replayed in real time and compared with
## proxysim's prediction, sync by sync (root; installs the tools; fails, never skips, when it cannot run)
realcp:
	@[ "$$(id -u)" = 0 ] || { echo "make realcp needs root"; exit 1; }
	bash netns/hostdeps.sh
	cd e2e/realcp && PROXYSIM_REALCP_REQUIRED=1 KUBE_PROXY="$(if $(KUBE_PROXY),$(abspath $(KUBE_PROXY)))" CGO_ENABLED=0 $(GO) test -count=1 -timeout 60m -v . -args $(if $(REALCP_SCENARIO),-realcp-scenario $(REALCP_SCENARIO)) $(if $(REALCP_MAX_LENGTH),-realcp-max-length $(REALCP_MAX_LENGTH))

.PHONY: realcp-ci
## realcp-ci: CI's subset of make realcp (root): REALCP_CI_SCENARIOS, short stories that cover iptables-nft,
## iptables-legacy, nftables with a failing transaction, a controller story and a restart, side by side (one process
## each), each verdict checked against the pinned one, then the kill test (docs/realcp.md "CI's subset")
REALCP_CI_SCENARIOS ?= iptables-traffic-policies,nftables-stale-chain-cleanup-failure,iptables-pod-label-change,restart-nftables
realcp-ci:
	@[ "$$(id -u)" = 0 ] || { echo "make realcp-ci needs root"; exit 1; }
	bash netns/hostdeps.sh
	logs=$$(mktemp -d /tmp/realcp-ci.XXXXXX) && \
	REALCP_LOGS=$$logs KUBE_PROXY="$(if $(KUBE_PROXY),$(abspath $(KUBE_PROXY)))" e2e/realcp/sidebyside.sh $(REALCP_CI_SCENARIOS) && \
	cd e2e/realcp && PROXYSIM_REALCP_REQUIRED=1 KUBE_PROXY="$(if $(KUBE_PROXY),$(abspath $(KUBE_PROXY)))" $$logs/realcp.test -test.v -test.count=1 -test.timeout 30m -test.run '^(TestKilledRunLeavesNothing|TestEveryScenarioHasACase)$$' && \
	rm -rf $$logs

.PHONY: realcp-long
## realcp-long: the long stories of make realcp (an hour of real time each: iptables-partial-sync,
## iptables-large-cluster, nftables-partial-and-full-syncs), side by side, one process each, every verdict checked
## against testdata/realcp-long.txt (root; about 65 min; REALCP_SERIAL=1 one after another, REALCP_UPDATE=1
## re-pins; docs/realcp.md "Side by side")
REALCP_LONG_SCENARIOS ?= iptables-partial-sync,iptables-large-cluster,nftables-partial-and-full-syncs
realcp-long:
	@[ "$$(id -u)" = 0 ] || { echo "make realcp-long needs root"; exit 1; }
	bash netns/hostdeps.sh
	KUBE_PROXY="$(if $(KUBE_PROXY),$(abspath $(KUBE_PROXY)))" e2e/realcp/sidebyside.sh $(REALCP_LONG_SCENARIOS) -realcp-long

.PHONY: calibrate
## calibrate: measure a cost profile on this machine (root; ≤ 10 min here): profile.json and profile.svg.
## CI: make calibrate CALIBRATE_ARGS='--quick --max-self-error 0.5' (66 s here; fails when the profile misses its own points)
calibrate:
	bash netns/hostdeps.sh
	CGO_ENABLED=0 $(GO) run ./cmd/proxysim calibrate $(CALIBRATE_ARGS)

.PHONY: calibrate-compute
## calibrate-compute: time kube-proxy v1.36.3's own proxiers (iptables, nftables) computing the syncs calibrate
## measures, and write the fitted compute terms into PROFILE (default: the default profile; about 2 min here;
## COMPUTE_ARGS=-calibrate-compute-quick for calibrate --quick's clusters). No root needed: it runs in a user
## and network namespace of its own (unshare -rn), because kube-proxy's nftables proxier runs nft.
PROFILE ?= sim/costprofile/profiles/default.json
calibrate-compute:
	cd e2e/upstream && CGO_ENABLED=0 $(GO) test -c -o $(CURDIR)/bin/upstream.test .
	unshare -rn bin/upstream.test -test.run '^TestCalibrateCompute$$' -test.v -test.timeout 30m -calibrate-compute $(abspath $(PROFILE)) $(COMPUTE_ARGS)

.PHONY: realcp-scale-repredict
## realcp-scale-repredict: recompute proxysim's predictions pinned in e2e/realcp/testdata/realcp-scale.txt from
## today's model and default profile, keeping kube-proxy's measured columns (no root; minutes: it replays every size)
realcp-scale-repredict:
	cd e2e/realcp && CGO_ENABLED=0 $(GO) test -count=1 -timeout 60m -v -run '^TestScalePredictionsArePinned$$' . -args -repredict-realcp-scale

.PHONY: realcp-scale
## realcp-scale: kube-proxy v1.36.3's binary (or KUBE_PROXY) over generated clusters of REALCP_SCALE Services
## (created through the real API server), its logged sync durations and CPU against the default cost profile's
## prediction, full and partial, per dataplane (root; docs/realcp.md "Sync durations at scale"; ~50 min here
## for the default sizes). REALCP_SCALE_UPDATE=1 rewrites e2e/realcp/testdata/realcp-scale.txt
REALCP_SCALE ?= 1000,2000,5000,10000,20000
REALCP_SCALE_MODES ?= iptables-nft,iptables-legacy,nftables
REALCP_SCALE_CAP ?= iptables-nft=10000,nftables=10000
realcp-scale:
	@[ "$$(id -u)" = 0 ] || { echo "make realcp-scale needs root"; exit 1; }
	bash netns/hostdeps.sh
	cd e2e/realcp && PROXYSIM_REALCP_REQUIRED=1 KUBE_PROXY="$(if $(KUBE_PROXY),$(abspath $(KUBE_PROXY)))" CGO_ENABLED=0 $(GO) test -count=1 -timeout 0 -v -run '^TestSyncDurationsAtScale$$' . -args -realcp-scale $(REALCP_SCALE) -realcp-scale-modes $(REALCP_SCALE_MODES) -realcp-scale-cap $(REALCP_SCALE_CAP) $(if $(REALCP_SCALE_UPDATE),-update-realcp-scale)

## same-traces: a refactoring changed no behaviour: every bundled scenario's
## trace, trace --work and replay output, from proxysim built at BASE
## (default main) and from the working tree, byte for byte (~2.5 min here)
BASE ?= main
.PHONY: same-traces
same-traces:
	GO=$(GO) bash e2e/same-traces.sh $(BASE)
