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

// Package webhook serves the validating admission webhook that spire-controller-manager serves
// and the official Helm chart registers: the same two paths on the same port, a serving
// certificate minted by SPIRE for the webhook Services' DNS names, and SPIRE's X.509
// authorities kept in the ValidatingWebhookConfiguration's caBundle. Every replica runs it,
// leader or not, because the Service sends admission calls to all of them.
package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/serving"
)

const (
	// DefaultPort is spire-controller-manager's webhook port, which the chart's Service targets.
	DefaultPort = 9443

	// refreshInterval is how often SPIRE's authorities are read and the certificate checked when
	// nothing else happens. SPIRE prepares a new CA long before it activates it, so a minute
	// is quick enough, and costs SPIRE one small call a minute.
	refreshInterval = time.Minute
	minRetry        = time.Second
	maxRetry        = time.Minute
)

// Options configure a Webhook.
type Options struct {
	// ConfigurationName is the ValidatingWebhookConfiguration whose caBundle is kept current.
	ConfigurationName string
	// Host and Port are where HTTPS is served; Host "" means every address.
	Host string
	Port int
	// ID is the SPIFFE ID of the serving certificate.
	ID *url.URL
	// DNSNames are added to the certificate besides those of the webhooks' Services: the
	// host of a webhook called by URL (as when running outside the cluster).
	DNSNames []string
	// Minter mints the certificate and reads SPIRE's authorities.
	Minter Minter
	// KubeClient reads and patches the ValidatingWebhookConfiguration.
	KubeClient clientset.Interface
	// Validators decide what is admitted.
	Validators Validators
}

// Webhook is the admission webhook and the upkeep of its certificate and caBundle.
type Webhook struct {
	opts   Options
	cert   *servingCertificate
	limits serverLimits

	mu       sync.Mutex
	caBundle []byte
	ready    bool
}

// New returns a webhook; Run serves it.
func New(opts Options) (*Webhook, error) {
	switch {
	case opts.ConfigurationName == "":
		return nil, errors.New("webhook: the ValidatingWebhookConfiguration name is empty")
	case opts.ID == nil:
		return nil, errors.New("webhook: no SPIFFE ID for the serving certificate")
	case opts.Minter == nil, opts.KubeClient == nil:
		return nil, errors.New("webhook: needs SPIRE and Kubernetes clients")
	case opts.Validators.ClusterSPIFFEID == nil, opts.Validators.ClusterFederatedTrustDomain == nil:
		return nil, errors.New("webhook: a validator is missing")
	}
	if opts.Port == 0 {
		opts.Port = DefaultPort
	}
	return &Webhook{
		opts:   opts,
		cert:   &servingCertificate{minter: opts.Minter, id: opts.ID, now: time.Now},
		limits: defaultLimits(),
	}, nil
}

// Ready reports whether the webhook has a certificate and has written the caBundle once.
func (w *Webhook) Ready() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ready
}

// Run serves admission reviews and keeps the certificate and caBundle current until ctx is
// done. It fails only if the port cannot be listened on; SPIRE or API errors are retried.
func (w *Webhook) Run(ctx context.Context) error {
	listener, err := w.Listen()
	if err != nil {
		return err
	}
	w.Serve(ctx, listener)
	return nil
}

// Listen opens the webhook's port, so that a port in use stops start-up before anything runs.
func (w *Webhook) Listen() (net.Listener, error) {
	addr := net.JoinHostPort(w.opts.Host, fmt.Sprint(w.opts.Port))
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("webhook: listen on %s: %w", addr, err)
	}
	return listener, nil
}

// Serve is Run on a listener from Listen; it closes the listener when ctx is done.
func (w *Webhook) Serve(ctx context.Context, listener net.Listener) {
	logger := klog.FromContext(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		logger.Info("Serving the validating webhook", "address", listener.Addr().String())
		tlsConfig := &tls.Config{GetCertificate: w.cert.get, MinVersion: tls.VersionTLS12}
		if err := serving.Serve(ctx, listener, w.opts.Validators.handler(w.limits), tlsConfig, w.limits.Limits); err != nil {
			logger.Error(err, "Webhook server stopped")
		}
	})
	w.keepCurrent(ctx)
}

// keepCurrent watches the ValidatingWebhookConfiguration and, on every change of it and at
// least every refreshInterval, refreshes the certificate and the caBundle.
func (w *Webhook) keepCurrent(ctx context.Context) {
	logger := klog.FromContext(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(w.opts.KubeClient, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", w.opts.ConfigurationName).String()
		}))
	informer := factory.Admissionregistration().V1().ValidatingWebhookConfigurations()
	changed := make(chan struct{}, 1)
	notify := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	_, _ = informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
		DeleteFunc: notify,
	})
	lister := informer.Lister()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, informer.Informer().HasSynced) {
		return
	}

	retry := minRetry
	for {
		wait := refreshInterval
		config, err := lister.Get(w.opts.ConfigurationName)
		switch {
		case apierrors.IsNotFound(err):
			logger.V(2).Info("Waiting for the ValidatingWebhookConfiguration", "name", w.opts.ConfigurationName)
		case err != nil:
			logger.Error(err, "Reading the ValidatingWebhookConfiguration")
		default:
			if err := w.refresh(ctx, config); err != nil {
				logger.Error(err, "Refreshing the webhook's certificate or caBundle failed; retrying", "retryIn", retry)
				wait, retry = retry, min(2*retry, maxRetry)
			} else {
				retry = minRetry
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-changed:
			t.Stop()
		case <-t.C:
		}
	}
}

// refresh mints a certificate if one is due and writes SPIRE's authorities into every
// webhook's caBundle that differs.
func (w *Webhook) refresh(ctx context.Context, config *admissionregistrationv1.ValidatingWebhookConfiguration) error {
	logger := klog.FromContext(ctx)
	authorities, err := w.opts.Minter.X509Authorities(ctx)
	if err != nil {
		return err
	}
	caBundle := encodeCABundle(authorities)
	dnsNames := certificateDNSNames(config, w.opts.DNSNames)
	reason, err := w.cert.rotateIfNeeded(ctx, dnsNames)
	if err != nil {
		return err
	}
	if reason != "" {
		logger.Info("Minted the webhook's serving certificate", "reason", reason, "dnsNames", dnsNames)
	}
	patch, err := caBundlePatch(config, caBundle)
	if err != nil {
		return err
	}
	if patch != nil {
		if _, err := w.opts.KubeClient.AdmissionregistrationV1().ValidatingWebhookConfigurations().
			Patch(ctx, config.Name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("write caBundle into %s: %w", config.Name, err)
		}
		logger.Info("Wrote SPIRE's authorities into the webhook caBundle", "configuration", config.Name)
	}
	w.mu.Lock()
	w.caBundle, w.ready = caBundle, true
	w.mu.Unlock()
	return nil
}
