package upstream133

import (
	"testing"

	_ "github.com/proxysim/proxysim/fakes"
	_ "github.com/proxysim/proxysim/scenarios"
	_ "github.com/proxysim/proxysim/scenarios/iptablesmode"
	_ "k8s.io/client-go/informers"
	_ "k8s.io/client-go/kubernetes/fake"
	_ "k8s.io/component-helpers/node/util/sysctl/testing"
	_ "k8s.io/kubernetes/pkg/proxy/config"
	_ "k8s.io/kubernetes/pkg/proxy/conntrack"
	_ "k8s.io/kubernetes/pkg/proxy/healthcheck"
	_ "k8s.io/kubernetes/pkg/proxy/iptables"
	_ "k8s.io/kubernetes/pkg/proxy/util"
	_ "k8s.io/kubernetes/pkg/util/iptables/testing"
)

func TestProbe(t *testing.T) {}
