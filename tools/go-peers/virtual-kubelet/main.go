// The Go peer of Stratus's kubelet benchmark: a virtual kubelet built on
// github.com/virtual-kubelet/virtual-kubelet's nodeutil, as a vendor's main
// builds one, over an in-memory provider that answers at once the way
// Stratus's MockPodProvider (and virtual-kubelet's own mock) does: a created
// pod is Running, a deleted one Succeeded, each change notified.
//
// It serves no kubelet API (nodeutil starts none without a TLS config), so
// it listens on nothing; `cargo xtask bench kubelet-go` runs it beside a
// Stratus node against the same API server. Benchmark tooling only: nothing
// here ships.
package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"os/signal"
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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// provider keeps the pods it was given, keyed by namespace/name.
type provider struct {
	mu       sync.Mutex
	pods     map[string]*corev1.Pod
	notifier func(*corev1.Pod)
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

// The kubelet API's calls: the benchmark makes none (no API is served).
var errNoAPI = errdefs.NotFound("this peer serves no kubelet API")

func (p *provider) GetContainerLogs(context.Context, string, string, string, api.ContainerLogOpts) (io.ReadCloser, error) {
	return nil, errNoAPI
}
func (p *provider) RunInContainer(context.Context, string, string, string, []string, api.AttachIO) error {
	return errNoAPI
}
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
	flag.Parse()
	lvl, err := logrus.ParseLevel(*level)
	if err != nil {
		os.Stderr.WriteString("virtual-kubelet peer: " + err.Error() + "\n")
		os.Exit(2)
	}
	logrus.SetLevel(lvl)
	log.L = logruslogger.FromLogrus(logrus.NewEntry(logrus.StandardLogger()))
	if err := run(*kubeconfig, *name, float32(*qps), *burst); err != nil && !errors.Is(err, context.Canceled) {
		os.Stderr.WriteString("virtual-kubelet peer: " + err.Error() + "\n")
		os.Exit(1)
	}
}

func run(kubeconfig, name string, qps float32, burst int) error {
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
		return &provider{pods: map[string]*corev1.Pod{}}, nil, nil
	}
	// Ten pod sync workers: the default of virtual-kubelet's command, and
	// of Stratus's.
	workers := func(cfg *nodeutil.NodeConfig) error { cfg.NumWorkers = 10; return nil }
	n, err := nodeutil.NewNode(name, newProvider, nodeutil.WithClient(client), workers)
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
