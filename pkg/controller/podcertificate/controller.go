/*
Copyright 2026 The spire-registrar Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package podcertificate is the controller that signs Kubernetes PodCertificateRequests
// (certificates.k8s.io/v1) for its signer name with X509-SVIDs of SPIRE's trust domain, and
// publishes SPIRE's X.509 authorities as a ClusterTrustBundle for that signer name. A pod
// that mounts a podCertificate volume then gets the identity its ClusterSPIFFEIDs declare,
// chaining to the same roots as a spire-agent's SVIDs, with no agent on its node.
//
// It is built as the entry controller is: informers and handlers that map events to request
// keys, one queue whose namespaces take turns, workers that sync a key. pkg/podcert holds the
// pure decisions (checks, lifetime, the certificate); pkg/render renders the pod's SPIFFE ID
// and DNS names from the same ClusterSPIFFEIDs as its entries. The signing CA is an
// intermediate SPIRE signs for this controller (NewDownstreamX509CA), held only in memory and
// renewed at half its life.
package podcertificate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/labels"
	certinformers "k8s.io/client-go/informers/certificates/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	clientset "k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	spireinformers "github.com/spire-registrar/spire-registrar/generated/informers/externalversions/spire/v1alpha1"
	spirelisters "github.com/spire-registrar/spire-registrar/generated/listers/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/controller/runner"
	"github.com/spire-registrar/spire-registrar/pkg/informercache"
	"github.com/spire-registrar/spire-registrar/pkg/podcert"
	"github.com/spire-registrar/spire-registrar/pkg/render"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// ControllerName names the controller in logs, metrics and leader election.
const ControllerName = "spire-registrar-pod-certificate-controller"

// requestQueueName names the queue of PodCertificateRequests in the workqueue and parking
// metrics.
const requestQueueName = "spire_registrar_podcertificaterequests"

// bundleKey is the one key of the trust bundle queue.
const bundleKey = "bundle"

// Options are the settings the controller signs with.
type Options struct {
	// SignerName is the signer the requests and the ClusterTrustBundle name.
	SignerName string
	// Settings render pods' identities as the entry controller renders their entries.
	render.Settings
	// IgnoreNamespace reports namespaces whose pods get no identity; nil ignores none.
	IgnoreNamespace func(namespace string) bool
	// Class selects the ClusterSPIFFEIDs that give pods identities, and ClusterSPIFFEIDLabels,
	// when not empty, narrows them to those with all these labels, as the informer does.
	Class                 config.Class
	ClusterSPIFFEIDLabels map[string]string
	// CATTL is the lifetime asked of SPIRE for the CA; 0 lets SPIRE choose.
	CATTL time.Duration
	// FailPendingAfter, when positive, marks a request Failed once it has waited that long for
	// a usable CA; otherwise it waits until it is issued or deleted.
	FailPendingAfter time.Duration
	// WaitForIdentity is how long after its creation a request whose pod has no identity
	// waits for one before it is denied; 0 denies it at once. A ClusterSPIFFEID, namespace
	// or pod that changes meanwhile has it decided again at once.
	WaitForIdentity time.Duration
	// ResyncInterval is how often the CA is checked for renewal and the ClusterTrustBundle is
	// brought up to date with SPIRE's authorities.
	ResyncInterval time.Duration
	// MaxResyncShare bounds the share of time resyncs take (see runner.Loop).
	MaxResyncShare float64
	// DefaultTTL is the lifetime of a certificate whose ClusterSPIFFEID sets no ttl (0:
	// podcert.DefaultTTL); MaxTTL, when positive, caps every certificate's.
	DefaultTTL, MaxTTL time.Duration
	// Identity is what a certificate may carry beyond what SPIRE allows any workload.
	Identity podcert.IdentityRules
	// DryRun writes nothing: no request status and no ClusterTrustBundle; what would be
	// written is logged.
	DryRun bool
	// FederatedSignerName, when not empty, is the signer name the bundles of the trust
	// domains SPIRE federates with are published for (see federatedbundles.go); the authority
	// must then be a FederatedAuthority.
	FederatedSignerName string
}

// Authority is what the controller needs of SPIRE: its CA, and the authorities it publishes.
type Authority interface {
	NewDownstreamX509CA(ctx context.Context, ttl time.Duration) (*spire.DownstreamCA, error)
	BundleX509Authorities(ctx context.Context) ([]spire.X509Authority, error)
}

// Controller signs PodCertificateRequests for one signer name and publishes the trust bundle
// their certificates chain to.
type Controller struct {
	opts     Options                                 // how requests are signed
	renderer *render.Renderer                        // renders pods' identities as their entries are rendered
	client   clientset.Interface                     // reads pods and nodes live; writes status and bundles
	lookups  *podLookups                             // the pods' volumes and service accounts, read live and cached
	ca       *caHolder                               // the signing CA, renewed from SPIRE
	events   *runner.Events                          // the controller's event broadcaster (Events are only logged)
	synced   atomic.Bool                             // set once the first CA and bundle sync succeeded
	caches   []cache.InformerSynced                  // the informers Run waits for
	requests certlisters.PodCertificateRequestLister // the requests for the signer name
	bundles  certlisters.ClusterTrustBundleLister    // the bundles, at least those marked as spire-registrar's

	pods            *informercache.PodLister           // pods as the cache keeps them (render.CachedPod)
	wholePods       *informercache.WholePods           // pods read whole, for templates that read more
	namespaceLister corelisters.NamespaceLister        // namespaces, for selectors
	nodeLister      corelisters.NodeLister             // nodes, for the request check and templates
	slices          *informercache.EndpointSliceLister // EndpointSlices by the pods they target

	clusterSPIFFEIDLister spirelisters.ClusterSPIFFEIDLister // the declarations of identities
	compiled              *render.CompiledClusterSPIFFEIDs   // their compiled forms

	queue       workqueue.TypedRateLimitingInterface[string] // request keys, namespace/name, namespaces in turn
	parking     *runner.Parking[string]                      // requests waiting for a usable CA
	waiting     *waitingRequests                             // requests waiting for their pod to get an identity
	bundleQueue workqueue.TypedRateLimitingInterface[string] // the trust bundle's one key
	handlers    runner.Handlers                              // added to the informers, removed when Run returns

	federatedAuthority FederatedAuthority                               // reads federated bundles; nil without a federated signer name
	federated          atomic.Pointer[map[string][]spire.X509Authority] // federated trust domains' authorities as last listed
}

// NewController wires the controller to its informers: the requests of the signer name (the
// caller narrows their informer with a field selector on spec.signerName), the bundles (the
// caller may narrow them to those labelled ManagedByLabel=ManagedBy; others are never
// touched), and the informers pods are rendered from. It registers indexes and event handlers
// and starts nothing. client writes request status and bundles, and reads the pod and node an
// informer may lag behind on before a request is denied for them.
func NewController(
	ctx context.Context,
	requestInformer certinformers.PodCertificateRequestInformer,
	bundleInformer certinformers.ClusterTrustBundleInformer,
	podInformer coreinformers.PodInformer,
	namespaceInformer coreinformers.NamespaceInformer,
	nodeInformer coreinformers.NodeInformer,
	sliceInformer discoveryinformers.EndpointSliceInformer,
	clusterSPIFFEIDInformer spireinformers.ClusterSPIFFEIDInformer,
	client clientset.Interface,
	authority Authority,
	opts Options,
) (*Controller, error) {
	if opts.SignerName == "" {
		return nil, fmt.Errorf("a signer name is required")
	}
	if opts.ResyncInterval <= 0 {
		return nil, fmt.Errorf("resync interval must be positive, got %v", opts.ResyncInterval)
	}
	if opts.IgnoreNamespace == nil {
		opts.IgnoreNamespace = func(string) bool { return false }
	}
	r, err := render.NewRenderer(opts.Settings)
	if err != nil {
		return nil, err
	}
	c := &Controller{
		opts:      opts,
		renderer:  r,
		client:    client,
		lookups:   newPodLookups(client),
		wholePods: informercache.NewWholePods(client.CoreV1()),
		ca:        newCAHolder(authority, opts.CATTL),
		// Request outcomes are in their status, and the kubelet tells the pod in an Event of
		// its own; Events of this controller's are only logged.
		events:   runner.NewEvents(ctx, ControllerName, nil, true),
		requests: requestInformer.Lister(),
		bundles:  bundleInformer.Lister(),

		namespaceLister:       namespaceInformer.Lister(),
		nodeLister:            nodeInformer.Lister(),
		clusterSPIFFEIDLister: clusterSPIFFEIDInformer.Lister(),
		compiled:              render.NewCompiledClusterSPIFFEIDs(),

		queue:       runner.NewFairQueue(requestQueueName, 50, 500, namespaceOfKey),
		waiting:     newWaitingRequests(),
		bundleQueue: runner.NewQueue[string]("spire_registrar_clustertrustbundles", 10, 100),
	}
	c.parking = runner.NewParking(requestQueueName, c.queue, c.ca.probe)
	if opts.FederatedSignerName != "" {
		fa, ok := authority.(FederatedAuthority)
		if !ok {
			return nil, fmt.Errorf("publishing federated bundles needs a SPIRE client that lists federation relationships")
		}
		c.federatedAuthority = fa
	}
	if c.pods, err = informercache.NewPodLister(podInformer.Informer()); err != nil {
		return nil, err
	}
	if c.slices, err = informercache.NewEndpointSliceLister(sliceInformer.Informer()); err != nil {
		return nil, err
	}
	c.caches = []cache.InformerSynced{
		requestInformer.Informer().HasSynced, bundleInformer.Informer().HasSynced,
		podInformer.Informer().HasSynced, namespaceInformer.Informer().HasSynced, nodeInformer.Informer().HasSynced,
		sliceInformer.Informer().HasSynced, clusterSPIFFEIDInformer.Informer().HasSynced,
	}
	if err := c.handlers.Add(requestInformer.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueRequest,
		UpdateFunc: func(_, newObj any) { c.enqueueRequest(newObj) },
		DeleteFunc: c.forgetRequest,
	}); err != nil {
		return nil, err
	}
	// A deleted ClusterSPIFFEID's compiled form is of no more use. Any change to the
	// ClusterSPIFFEIDs may give a waiting request's pod its identity.
	if err := c.handlers.Add(clusterSPIFFEIDInformer.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onClusterSPIFFEIDAdd,
		UpdateFunc: c.onClusterSPIFFEIDUpdate,
		DeleteFunc: c.onClusterSPIFFEIDDelete,
	}); err != nil {
		return nil, err
	}
	if err := c.handlers.Add(namespaceInformer.Informer(), cache.ResourceEventHandlerFuncs{UpdateFunc: c.onNamespaceUpdate}); err != nil {
		return nil, err
	}
	if err := c.handlers.Add(podInformer.Informer(), cache.ResourceEventHandlerFuncs{UpdateFunc: c.onPodUpdate}); err != nil {
		return nil, err
	}
	// A bundle of the signer name changed behind the controller's back: put it right.
	if err := c.handlers.Add(bundleInformer.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.bundleQueue.Add(bundleKey) },
		UpdateFunc: func(any, any) { c.bundleQueue.Add(bundleKey) },
		DeleteFunc: func(any) { c.bundleQueue.Add(bundleKey) },
	}); err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(2).Info("Signing PodCertificateRequests", "signerName", opts.SignerName)
	return c, nil
}

// Start refuses a signer name whose bundles another spire-registrar publishes, and gets the
// first CA from SPIRE, so that a caller SPIRE will never give one fails at start with what to
// fix. Only those refusals are returned: when SPIRE is unreachable, Run keeps asking.
func (c *Controller) Start(ctx context.Context) error {
	if err := c.checkBundleOwners(ctx); err != nil {
		return err
	}
	return c.ca.first(ctx)
}

// HasSynced reports whether the controller holds a CA and has published the trust bundle.
func (c *Controller) HasSynced() bool {
	return c.synced.Load()
}

// Waiting is how many PodCertificateRequests wait for a usable CA from SPIRE.
func (c *Controller) Waiting() int {
	return c.parking.Len()
}

// WaitingForIdentity is how many PodCertificateRequests wait for their pod to get an
// identity before they are denied.
func (c *Controller) WaitingForIdentity() int {
	return c.waiting.len()
}

// Run waits for the informers, gets a CA and publishes the trust bundle (retrying until SPIRE
// answers), then signs requests with workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	runner.Run(ctx, runner.Loop{
		Name:           ControllerName,
		Events:         c.events,
		CachesSynced:   c.caches,
		Resync:         c.resync,
		ResyncInterval: c.opts.ResyncInterval,
		MaxResyncShare: c.opts.MaxResyncShare,
		// A SPIRE that restarted may have other authorities (keys kept in memory, a restore):
		// the trust bundle and the CA are checked as soon as it is back.
		WatchSPIRE: func(ctx context.Context, reconnected func()) { spire.WatchReconnects(ctx, c.ca.authority, reconnected) },
		OnSynced:   func() { c.synced.Store(true) },
		Workers: []runner.Workers{
			{Count: workers, Work: func(ctx context.Context) {
				runner.Work(ctx, ControllerName, "podCertificateRequest", c.queue, c.parking, c.syncRequest)
			}},
			{Count: 1, Work: func(ctx context.Context) {
				runner.Work(ctx, ControllerName, "clusterTrustBundle", c.bundleQueue, nil, c.syncBundle)
			}},
			{Count: 1, Work: c.parking.Run},
		},
		Queues:   []runner.ShutDowner{c.queue, c.bundleQueue},
		Handlers: &c.handlers,
	})
}

// enqueueRequest queues a request of the signer name that has not ended.
func (c *Controller) enqueueRequest(obj any) {
	req, ok := runner.Unwrap[*certificatesv1.PodCertificateRequest](obj)
	if !ok || req.Spec.SignerName != c.opts.SignerName || ended(req) {
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(req)
	if err == nil {
		c.queue.Add(key)
	}
}

// forgetRequest stops counting a deleted request as waiting.
func (c *Controller) forgetRequest(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.waiting.forget(key)
	}
}

// namespaceOfKey is the namespace of a namespace/name key: the queue's keys take turns by it.
func namespaceOfKey(key string) string {
	namespace, _, _ := strings.Cut(key, "/")
	return namespace
}

// resync queues every request that has not ended, renews the CA when it is due and brings
// the trust bundle up to date with SPIRE's authorities. It fails, and is retried, when SPIRE
// cannot be read or the CA cannot be had; the bundle is brought up to date whenever the
// authorities could be read, since verifiers of every SVID of the trust domain need it
// whether or not this controller can sign.
//
// Queuing the requests is what makes a request the worker dropped after its retries (an
// informer that lagged, an API server that refused the status write) a delayed one rather
// than a lost one: no other event brings it back, since kubelet never changes a request.
func (c *Controller) resync(ctx context.Context) error {
	requests, err := c.requests.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing PodCertificateRequests: %w", err)
	}
	for _, req := range requests {
		c.enqueueRequest(req)
	}
	authorities, err := c.ca.authority.BundleX509Authorities(ctx)
	if err != nil {
		return fmt.Errorf("reading SPIRE's X.509 authorities: %w", err)
	}
	// renewIfDue records the authorities before it renews, so the bundle sync sees them even
	// when the renewal fails. Requests that wait for a CA are retried by the parking once the
	// CA is usable.
	err = errors.Join(c.ca.renewIfDue(ctx, time.Now(), authorities), c.listFederated(ctx))
	c.bundleQueue.Add(bundleKey)
	return err
}
