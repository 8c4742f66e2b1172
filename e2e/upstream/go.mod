module github.com/proxysim/proxysim/e2e/upstream

go 1.26

require (
	github.com/proxysim/proxysim v0.0.0
	k8s.io/kubernetes v1.36.3
)

replace github.com/proxysim/proxysim => ../..
