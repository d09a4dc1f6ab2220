// The Go peer of Stratus's kubelet benchmark: a virtual kubelet built on
// github.com/virtual-kubelet/virtual-kubelet's nodeutil, as a vendor's main
// builds one, over an in-memory provider that answers at once the way
// Stratus's MockPodProvider (and virtual-kubelet's own mock) does: a created
// pod is Running, a deleted one Succeeded, each change notified.
//
// `cargo xtask bench kubelet-go` runs it beside a Stratus node against the
// same API server. With --listen (and a serving key pair and the API
// server's kubelet client CA) it serves the kubelet API as nodeutil serves
// it, behind nodeutil's webhook authentication and authorization: `cat` as
// exec (stdin echoed to stdout) and --log-bytes of log text, for `cargo
// xtask bench kubelet-api`. Without --listen it listens on nothing.
//
// With --tuned it is configured as a vendor who cares about speed would
// configure nodeutil: its three pod queues (sync from Kubernetes, delete
// from Kubernetes, status from the provider) get a per-item back-off from
// 5 ms instead of client-go's default controller rate limiter, whose
// overall bucket lets 10 items a second through after a burst of 100
// (nodeutil's WithPodControllerConfigOverrides); --workers sets its pod
// sync workers.
// Benchmark tooling only: nothing here ships.
package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/sirupsen/logrus"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	logruslogger "github.com/virtual-kubelet/virtual-kubelet/log/logrus"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// provider keeps the pods it was given, keyed by namespace/name.
type provider struct {
	mu       sync.Mutex
	pods     map[string]*corev1.Pod
	notifier func(*corev1.Pod)
	// logBytes is the length of every container's log.
	logBytes int64
}

func key(namespace, name string) string { return namespace + "/" + name }

func (p *provider) CreatePod(_ context.Context, pod *corev1.Pod) error {
	now := metav1.NewTime(time.Now())
	pod = pod.DeepCopy()
	pod.Status = corev1.PodStatus{
		Phase:     corev1.PodRunning,
		HostIP:    "10.0.0.1",
		PodIP:     "10.0.0.2",
		StartTime: &now,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		},
	}
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name:    c.Name,
			Image:   c.Image,
			Ready:   true,
			Started: func() *bool { t := true; return &t }(),
			State:   corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	p.mu.Lock()
	p.pods[key(pod.Namespace, pod.Name)] = pod
	notify := p.notifier
	p.mu.Unlock()
	if notify != nil {
		notify(pod)
	}
	return nil
}

func (p *provider) UpdatePod(_ context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.pods[key(pod.Namespace, pod.Name)]; ok {
		updated := pod.DeepCopy()
		updated.Status = old.Status
		p.pods[key(pod.Namespace, pod.Name)] = updated
	}
	return nil
}

func (p *provider) DeletePod(_ context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	stored, ok := p.pods[key(pod.Namespace, pod.Name)]
	delete(p.pods, key(pod.Namespace, pod.Name))
	notify := p.notifier
	p.mu.Unlock()
	if !ok {
		return errdefs.NotFound("pod not found")
	}
	now := metav1.Now()
	ended := stored.DeepCopy()
	ended.Status.Phase = corev1.PodSucceeded
	ended.Status.Reason = "ProviderPodDeleted"
	for i := range ended.Status.ContainerStatuses {
		s := &ended.Status.ContainerStatuses[i]
		s.Ready = false
		s.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Reason: "ProviderPodDeleted", FinishedAt: now,
		}}
	}
	if notify != nil {
		notify(ended)
	}
	return nil
}

func (p *provider) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pod, ok := p.pods[key(namespace, name)]; ok {
		return pod.DeepCopy(), nil
	}
	return nil, errdefs.NotFound("pod not found")
}

func (p *provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

func (p *provider) GetPods(context.Context) ([]*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(p.pods))
	for _, pod := range p.pods {
		out = append(out, pod.DeepCopy())
	}
	return out, nil
}

func (p *provider) NotifyPods(_ context.Context, notify func(*corev1.Pod)) {
	p.mu.Lock()
	p.notifier = notify
	p.mu.Unlock()
}

// The kubelet API's calls the benchmark makes: logs and exec.

// logLine is the log's text, as Stratus's benchmark provider writes it.
const logLine = "2026-11-22T10:00:00.000000000Z the quick brown fox jumps over the lazy dog\n"

// repeated reads its text over and over.
type repeated struct {
	text []byte
	at   int
}

func (r *repeated) Read(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		c := copy(b[n:], r.text[r.at:])
		n += c
		r.at = (r.at + c) % len(r.text)
	}
	return n, nil
}

func (p *provider) GetContainerLogs(_ context.Context, namespace, name, _ string, _ api.ContainerLogOpts) (io.ReadCloser, error) {
	if _, err := p.GetPod(context.Background(), namespace, name); err != nil {
		return nil, err
	}
	return io.NopCloser(io.LimitReader(&repeated{text: []byte(logLine)}, p.logBytes)), nil
}

// RunInContainer runs every command as `cat`: stdin back on stdout.
func (p *provider) RunInContainer(_ context.Context, namespace, name, _ string, _ []string, attach api.AttachIO) error {
	if _, err := p.GetPod(context.Background(), namespace, name); err != nil {
		return err
	}
	if attach.Stdin() == nil || attach.Stdout() == nil {
		return nil
	}
	_, err := io.Copy(attach.Stdout(), attach.Stdin())
	return err
}

// The calls the benchmark does not make.
var errNoAPI = errdefs.NotFound("this peer serves only logs and exec")

func (p *provider) AttachToContainer(context.Context, string, string, string, api.AttachIO) error {
	return errNoAPI
}
func (p *provider) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	return nil, errNoAPI
}
func (p *provider) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) {
	return nil, errNoAPI
}
func (p *provider) PortForward(context.Context, string, string, int32, io.ReadWriteCloser) error {
	return errNoAPI
}

var _ node.PodNotifier = (*provider)(nil)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "the API server's kubeconfig")
	name := flag.String("nodename", "vk-go", "the Node's name")
	qps := flag.Float64("qps", 5, "client-go's client-side limit in requests per second (5 and a burst of 10 are client-go's defaults, which virtual-kubelet's command keeps; a negative value turns the limit off, as Stratus's clients have none)")
	burst := flag.Int("burst", 10, "client-go's burst over --qps")
	level := flag.String("log-level", "warning", "the log level (debug, info, warning, error)")
	var api apiFlags
	flag.StringVar(&api.listen, "listen", "", "serve the kubelet API on this address (host:port); the Node advertises the host and the port")
	flag.StringVar(&api.cert, "tls-cert", "", "the kubelet API's serving certificate (PEM file)")
	flag.StringVar(&api.key, "tls-key", "", "its key (PEM file)")
	flag.StringVar(&api.clientCA, "client-ca", "", "the CA of the API server's kubelet client certificates (PEM file)")
	flag.Int64Var(&api.logBytes, "log-bytes", 256<<20, "the length of every container's log")
	var queues queueFlags
	flag.BoolVar(&queues.tuned, "tuned", false, "the pod queues' rate limiters without client-go's overall bucket: a per-item exponential back-off from 5 ms (as a vendor tuning nodeutil for speed sets them)")
	flag.IntVar(&queues.workers, "workers", 10, "pod sync workers (10: virtual-kubelet's command default, and Stratus's)")
	flag.Parse()
	lvl, err := logrus.ParseLevel(*level)
	if err != nil {
		os.Stderr.WriteString("virtual-kubelet peer: " + err.Error() + "\n")
		os.Exit(2)
	}
	logrus.SetLevel(lvl)
	log.L = logruslogger.FromLogrus(logrus.NewEntry(logrus.StandardLogger()))
	if err := run(*kubeconfig, *name, float32(*qps), *burst, api, queues); err != nil && !errors.Is(err, context.Canceled) {
		os.Stderr.WriteString("virtual-kubelet peer: " + err.Error() + "\n")
		os.Exit(1)
	}
}

// queueFlags configure the pod controller's queues.
type queueFlags struct {
	tuned   bool
	workers int
}

// itemBackoff is the rate limiter of a tuned pod queue: a failed item is
// retried after 5 ms, doubling up to 1,000 s (client-go's item back-off),
// and nothing limits items that did not fail.
func itemBackoff() workqueue.TypedRateLimiter[any] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[any](5*time.Millisecond, 1000*time.Second)
}

// apiFlags configure the kubelet API.
type apiFlags struct {
	listen, cert, key, clientCA string
	logBytes                    int64
}

func run(kubeconfig, name string, qps float32, burst int, apiFlags apiFlags, queues queueFlags) error {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	config.QPS, config.Burst = qps, burst
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	newProvider := func(cfg nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
		// The capacity of Stratus's MockPodProvider node.
		cfg.Node.Status.Capacity = corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("20"),
			corev1.ResourceMemory: resource.MustParse("100Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
		}
		cfg.Node.Status.Allocatable = cfg.Node.Status.Capacity
		if apiFlags.listen != "" {
			// Where the API server reaches the kubelet API.
			host, port, err := net.SplitHostPort(apiFlags.listen)
			if err != nil {
				return nil, nil, err
			}
			number, err := strconv.ParseInt(port, 10, 32)
			if err != nil {
				return nil, nil, err
			}
			cfg.Node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(number)
			cfg.Node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: host}}
		}
		return &provider{pods: map[string]*corev1.Pod{}, logBytes: apiFlags.logBytes}, nil, nil
	}
	// Ten pod sync workers unless told otherwise: the default of
	// virtual-kubelet's command, and of Stratus's.
	workers := func(cfg *nodeutil.NodeConfig) error { cfg.NumWorkers = queues.workers; return nil }
	opts := []nodeutil.NodeOpt{nodeutil.WithClient(client), workers}
	if queues.tuned {
		opts = append(opts, nodeutil.WithPodControllerConfigOverrides(func(c *node.PodControllerConfig) error {
			c.SyncPodsFromKubernetesRateLimiter = itemBackoff()
			c.DeletePodsFromKubernetesRateLimiter = itemBackoff()
			c.SyncPodStatusFromProviderRateLimiter = itemBackoff()
			return nil
		}))
	}
	if apiFlags.listen != "" {
		serving, err := kubeletAPI(client, name, apiFlags)
		if err != nil {
			return err
		}
		opts = append(opts, serving...)
	}
	n, err := nodeutil.NewNode(name, newProvider, opts...)
	if err != nil {
		return err
	}
	go n.Run(ctx) //nolint:errcheck
	if err := n.WaitReady(ctx, time.Minute); err != nil {
		return err
	}
	<-n.Done()
	return n.Err()
}

// kubeletAPI: the options that serve the kubelet API as a vendor's main
// does with nodeutil: TLS with the API server's kubelet client CA, the
// provider's routes behind webhook authentication (x509 and TokenReview)
// and authorization (SubjectAccessReview), as Stratus's node serves it.
func kubeletAPI(client kubernetes.Interface, name string, f apiFlags) ([]nodeutil.NodeOpt, error) {
	caPEM, err := os.ReadFile(f.clientCA)
	if err != nil {
		return nil, err
	}
	ca, err := dynamiccertificates.NewStaticCAContent("kubelet-client-ca", caPEM)
	if err != nil {
		return nil, err
	}
	auth, err := nodeutil.WebhookAuth(client, name, func(c *nodeutil.WebhookAuthConfig) error {
		c.AuthnConfig.ClientCertificateCAContentProvider = ca
		return nil
	})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	listen := func(cfg *nodeutil.NodeConfig) error {
		cfg.HTTPListenAddr = f.listen
		cfg.Handler = nodeutil.WithAuth(auth, mux)
		return nil
	}
	return []nodeutil.NodeOpt{
		nodeutil.AttachProviderRoutes(mux),
		nodeutil.WithTLSConfig(nodeutil.WithKeyPairFromPath(f.cert, f.key), nodeutil.WithCACert(caPEM)),
		listen,
	}, nil
}
