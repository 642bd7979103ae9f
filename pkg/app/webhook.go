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

package app

import (
	"context"
	"net/url"
	"os"

	"k8s.io/apimachinery/pkg/util/validation/field"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	fedreconciler "github.com/spire-registrar/spire-registrar/pkg/reconciler/federation"
	"github.com/spire-registrar/spire-registrar/pkg/render"
	"github.com/spire-registrar/spire-registrar/pkg/webhook"
)

// webhookPath is the path of the serving certificate's SPIFFE ID: spire-controller-manager's,
// so that whatever a user keyed on it (an audit query, a policy) keeps working after a swap.
const webhookPath = "/spire-controller-manager-webhook"

// webhooksEnabled reports whether the admission webhook is to be served: when the config names
// a ValidatingWebhookConfiguration and ENABLE_WEBHOOKS is not "false", as in
// spire-controller-manager, whose default is on.
func webhooksEnabled(cfg *config.Config) bool {
	return cfg.ValidatingWebhookConfigurationName != "" && os.Getenv("ENABLE_WEBHOOKS") != "false"
}

// newWebhook returns the admission webhook for cfg: served on webhook.host:webhook.port, its
// certificate minted by the SPIRE server behind minter, validating with the controllers' own
// rendering and parsing code.
func newWebhook(cfg *config.Config, kubeClient clientset.Interface, minter webhook.Minter) (*webhook.Webhook, error) {
	return webhook.New(webhook.Options{
		ConfigurationName: cfg.ValidatingWebhookConfigurationName,
		Host:              cfg.Webhook.Host,
		Port:              cfg.Webhook.Port,
		ID:                &url.URL{Scheme: "spiffe", Host: cfg.TrustDomain.Name(), Path: webhookPath},
		Minter:            minter,
		KubeClient:        kubeClient,
		Validators:        validators(cfg),
	})
}

// validators are the checks the webhook runs: the controllers' own, so that what is admitted
// is what they can reconcile.
func validators(cfg *config.Config) webhook.Validators {
	return webhook.Validators{
		ClusterSPIFFEID: func(o *spirev1alpha1.ClusterSPIFFEID) field.ErrorList {
			return render.ValidateClusterSPIFFEID(o, cfg.TrustDomain.Name())
		},
		ClusterFederatedTrustDomain: func(o *spirev1alpha1.ClusterFederatedTrustDomain) field.ErrorList {
			return fedreconciler.ValidateSpec(&o.Spec, cfg.TrustDomain.Name())
		},
	}
}

// startWebhook listens on the webhook's port and serves it until ctx is done; the returned
// channel closes when it has stopped. It runs on every replica, leader or not, since the
// webhook's Service sends admission calls to all of them.
func startWebhook(ctx context.Context, cfg *config.Config, kubeClient clientset.Interface, minter webhook.Minter) (<-chan struct{}, error) {
	hook, err := newWebhook(cfg, kubeClient, minter)
	if err != nil {
		return nil, err
	}
	listener, err := hook.Listen()
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		hook.Serve(klog.NewContext(ctx, klog.LoggerWithName(klog.FromContext(ctx), "webhook")), listener)
	}()
	return done, nil
}
