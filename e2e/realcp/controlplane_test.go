package realcp

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	apiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
)

// The API server's Service range is serviceCIDR, so its own
// default/kubernetes Service takes 10.111.0.1; a second ServiceCIDR object
// holds libraryCIDR, where the library's ClusterIPs are (kubeadm's
// default range: one of them is 10.96.0.1, which the kubernetes Service
// would otherwise take). ServiceCIDRs may overlap.
const (
	serviceCIDR = "10.111.0.0/16"
	libraryCIDR = "10.96.0.0/12"
)

// controlPlane is etcd and kube-apiserver, both in this process.
type controlPlane struct {
	etcd   *embed.Etcd
	config *rest.Config // the API server's loopback client (a token)
	client kubernetes.Interface
	// port is the API server's on the host's 127.0.0.1.
	port int
	// Startup is how long etcd and the API server took to become ready.
	Startup time.Duration
}

// freePort is a free TCP port on 127.0.0.1 (closed again: whoever binds it
// next may lose a race, as upstream's own etcd test helper may).
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startEtcd starts etcd v3.6.8 embedded, its data in dir, without fsync
// (a test's data need not survive a crash), on two free ports.
func startEtcd(dir string) (*embed.Etcd, string, error) {
	cfg := embed.NewConfig()
	cfg.UnsafeNoFsync = true
	cfg.Dir = filepath.Join(dir, "etcd")
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	var urls [2]url.URL
	for i := range urls {
		p, err := freePort()
		if err != nil {
			return nil, "", err
		}
		urls[i] = url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(p))}
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{urls[0]}, []url.URL{urls[0]}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{urls[1]}, []url.URL{urls[1]}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, "", fmt.Errorf("etcd was not ready after 60s")
	}
	return e, urls[0].String(), nil
}

// startControlPlane starts etcd and the API server for t, both stopped
// when t ends. The API server runs as upstream's integration tests run it
// (test/integration/framework DefaultTestServerFlags): no endpoint
// reconciler (it would publish 127.0.0.1 as the kubernetes Service's
// endpoint), no ServiceAccount admission (no controller makes tokens).
// extraFlags are more kube-apiserver flags (a wider node port range for
// generated clusters).
func startControlPlane(t *testing.T, dir string, extraFlags ...string) *controlPlane {
	t.Helper()
	start := time.Now()
	e, etcdURL, err := startEtcd(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	storage := storagebackend.NewDefaultConfig("/registry", nil)
	storage.Transport.ServerList = []string{etcdURL}
	srv, err := apiservertesting.StartTestServer(t, nil, append([]string{
		"--endpoint-reconciler-type=none",
		"--disable-admission-plugins=ServiceAccount",
		"--service-cluster-ip-range=" + serviceCIDR,
	}, extraFlags...), storage)
	if err != nil {
		t.Fatalf("kube-apiserver: %v", err)
	}
	t.Cleanup(srv.TearDownFn)
	cfg := rest.CopyConfig(srv.ClientConfig)
	cfg.QPS, cfg.Burst = -1, 0 // the scenario's writes go out at their instants
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatalf("API server address %q: %v", cfg.Host, err)
	}
	// The API server makes default/kubernetes itself, shortly after start:
	// kube-proxy will program it, so it is there before kube-proxy starts.
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the API server made no default/kubernetes Service: %v", err)
	}
	library := &networkingv1.ServiceCIDR{
		ObjectMeta: metav1.ObjectMeta{Name: "library"},
		Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{libraryCIDR}},
	}
	sc, err := client.NetworkingV1().ServiceCIDRs().Create(context.Background(), library, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("ServiceCIDR %s: %v", libraryCIDR, err)
	}
	// Services allocate only from a Ready ServiceCIDR; kube-controller-
	// manager's servicecidrs controller, which would set it, does not run
	// here.
	sc.Status.Conditions = []metav1.Condition{{
		Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionTrue,
		Reason: "realcp", LastTransitionTime: metav1.Now(),
	}}
	if _, err := client.NetworkingV1().ServiceCIDRs().UpdateStatus(context.Background(), sc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("ServiceCIDR %s ready: %v", libraryCIDR, err)
	}
	return &controlPlane{etcd: e, config: cfg, client: client, port: port, Startup: time.Since(start)}
}

// kubernetesService is the API server's own Service, as kube-proxy sees
// it (for the prediction).
func (cp *controlPlane) kubernetesService(ctx context.Context) (*v1.Service, error) {
	return cp.client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
}
