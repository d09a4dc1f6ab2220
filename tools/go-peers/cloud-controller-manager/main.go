// The Go peer of Stratus's cloud-controller-manager benchmark: a cloud
// controller manager built on k8s.io/cloud-provider as a vendor's main builds
// one (app.NewCloudControllerManagerCommand, the sample's shape), over an
// in-memory cloud that answers the way Stratus's FakeCloud does in
// `cargo xtask bench ccm-go`: every call takes --cloud-latency, calls beyond a
// token bucket of --cloud-qps (burst --cloud-burst) fail as throttled, an
// instance exists for every node name, and a load balancer keeps its hosts.
//
// The cloud's call counts and load balancers are served as JSON on
// 127.0.0.1 (the address printed first on stdout, `cloud-state ADDR`), so the
// benchmark can read them from outside. Benchmark tooling only: nothing here
// ships.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"
)

// providerName is the --cloud-provider this main registers.
const providerName = "fake"

// errThrottled is what a call beyond the budget answers, as a real cloud's
// "rate exceeded".
var errThrottled = errors.New("Throttling: rate exceeded")

// cloud is the in-memory cloud: its budget, its call log and its load
// balancers.
type cloud struct {
	latency time.Duration
	// addressBase is the first two octets of every instance's InternalIP.
	addressBase string

	mu        sync.Mutex
	rate      float64
	burst     float64
	tokens    float64
	last      time.Time
	calls     map[string]int
	balancers map[string][]string
}

// call accounts for one call: logs it, takes a token or fails throttled,
// then waits the latency.
func (c *cloud) call(ctx context.Context, method string) error {
	c.mu.Lock()
	c.calls[method]++
	now := time.Now()
	c.tokens = min(c.burst, c.tokens+now.Sub(c.last).Seconds()*c.rate)
	c.last = now
	var err error
	if c.tokens >= 1 {
		c.tokens--
	} else {
		err = errThrottled
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	select {
	case <-time.After(c.latency):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// index is N in a node named node-N (0 for any other name).
func index(name string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(name, "node-"))
	return n
}

func (c *cloud) address(name string) string {
	i := index(name)
	return fmt.Sprintf("%s.%d.%d", c.addressBase, (i/256)%256, i%256)
}

func (c *cloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}
func (c *cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool)                  { return c, true }
func (c *cloud) Instances() (cloudprovider.Instances, bool)                        { return nil, false }
func (c *cloud) InstancesV2() (cloudprovider.InstancesV2, bool)                    { return c, true }
func (c *cloud) Zones() (cloudprovider.Zones, bool)                                { return nil, false }
func (c *cloud) Clusters() (cloudprovider.Clusters, bool)                          { return nil, false }
func (c *cloud) Routes() (cloudprovider.Routes, bool)                              { return nil, false }
func (c *cloud) ProviderName() string                                              { return providerName }
func (c *cloud) HasClusterID() bool                                                { return true }

func (c *cloud) InstanceExists(ctx context.Context, _ *v1.Node) (bool, error) {
	return true, c.call(ctx, "instance_exists")
}

func (c *cloud) InstanceShutdown(ctx context.Context, _ *v1.Node) (bool, error) {
	return false, c.call(ctx, "instance_shutdown")
}

func (c *cloud) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	if err := c.call(ctx, "instance_metadata"); err != nil {
		return nil, err
	}
	return &cloudprovider.InstanceMetadata{
		ProviderID:    providerName + "://" + node.Name,
		InstanceType:  "fake.small",
		NodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: c.address(node.Name)}},
		Zone:          "fake-1a",
		Region:        "fake-1",
	}, nil
}

func (c *cloud) GetLoadBalancerName(_ context.Context, _ string, service *v1.Service) string {
	return string(service.UID)
}

func (c *cloud) GetLoadBalancer(ctx context.Context, cluster string, service *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	if err := c.call(ctx, "get_load_balancer"); err != nil {
		return nil, false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.balancers[c.GetLoadBalancerName(ctx, cluster, service)]; !ok {
		return nil, false, nil
	}
	return c.status(service), true, nil
}

// status is the load balancer's address: one per Service, from 203.0.0.0/16.
func (c *cloud) status(service *v1.Service) *v1.LoadBalancerStatus {
	i := index(strings.TrimPrefix(service.Name, "lb-"))
	ip := fmt.Sprintf("203.0.%d.%d", (i/250)%250, i%250+1)
	return &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: ip}}}
}

func hosts(nodes []*v1.Node) []string {
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	return names
}

func (c *cloud) EnsureLoadBalancer(ctx context.Context, cluster string, service *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	if err := c.call(ctx, "ensure_load_balancer"); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.balancers[c.GetLoadBalancerName(ctx, cluster, service)] = hosts(nodes)
	return c.status(service), nil
}

func (c *cloud) UpdateLoadBalancer(ctx context.Context, cluster string, service *v1.Service, nodes []*v1.Node) error {
	if err := c.call(ctx, "update_load_balancer"); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.balancers[c.GetLoadBalancerName(ctx, cluster, service)] = hosts(nodes)
	return nil
}

func (c *cloud) EnsureLoadBalancerDeleted(ctx context.Context, cluster string, service *v1.Service) error {
	if err := c.call(ctx, "ensure_load_balancer_deleted"); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.balancers, c.GetLoadBalancerName(ctx, cluster, service))
	return nil
}

// state is what GET /state answers.
type state struct {
	Calls    map[string]int `json:"calls"`
	WithHost int            `json:"with_host"`
}

// serveState serves GET /state?host=NAME on 127.0.0.1 (the calls made
// to each method, throttled ones included, and how many load balancers have
// the node NAME among their hosts) and prints its address.
func (c *cloud) serveState() error {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/state", func(w http.ResponseWriter, r *http.Request) {
		host := r.URL.Query().Get("host")
		c.mu.Lock()
		s := state{Calls: map[string]int{}}
		for method, n := range c.calls {
			s.Calls[method] = n
		}
		for _, hs := range c.balancers {
			for _, h := range hs {
				if h == host {
					s.WithHost++
					break
				}
			}
		}
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s)
	})
	fmt.Printf("cloud-state %s\n", listener.Addr())
	go func() { _ = http.Serve(listener, mux) }()
	return nil
}

func main() {
	// The cloud's own flags come first, up to "--"; the rest is the
	// controller manager's command line.
	own := flag.NewFlagSet("cloud", flag.ExitOnError)
	latency := own.Duration("cloud-latency", 20*time.Millisecond, "time every cloud call takes")
	qps := own.Float64("cloud-qps", 100, "the cloud's call budget per second")
	burst := own.Int("cloud-burst", 100, "the budget's burst")
	base := own.String("address-base", "10.0", "first two octets of every instance's InternalIP")
	args := os.Args[1:]
	split := len(args)
	for i, a := range args {
		if a == "--" {
			split = i
			break
		}
	}
	_ = own.Parse(args[:split])
	rest := []string{}
	if split < len(args) {
		rest = args[split+1:]
	}

	fake := &cloud{
		latency:     *latency,
		addressBase: *base,
		rate:        *qps,
		burst:       float64(*burst),
		tokens:      float64(*burst),
		last:        time.Now(),
		calls:       map[string]int{},
		balancers:   map[string][]string{},
	}
	cloudprovider.RegisterCloudProvider(providerName, func(_ io.Reader) (cloudprovider.Interface, error) {
		return fake, nil
	})
	if err := fake.serveState(); err != nil {
		fmt.Fprintf(os.Stderr, "cloud state: %v\n", err)
		os.Exit(1)
	}

	ccmOptions, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		klog.Fatalf("unable to initialize command options: %v", err)
	}
	command := app.NewCloudControllerManagerCommand(ccmOptions, initialize, app.DefaultInitFuncConstructors, names.CCMControllerAliases(), cliflag.NamedFlagSets{}, wait.NeverStop)
	command.SetArgs(rest)
	os.Exit(cli.Run(command))
}

// initialize is the sample main's cloud initializer.
func initialize(c *config.CompletedConfig) cloudprovider.Interface {
	shared := c.ComponentConfig.KubeCloudShared.CloudProvider
	provider, err := cloudprovider.InitCloudProvider(shared.Name, shared.CloudConfigFile)
	if err != nil || provider == nil {
		klog.Fatalf("cloud provider could not be initialized: %v", err)
	}
	return provider
}
