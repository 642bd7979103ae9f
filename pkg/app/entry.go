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

	spireinformers "github.com/spire-registrar/spire-registrar/generated/informers/externalversions/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/controller/entry"
	"github.com/spire-registrar/spire-registrar/pkg/reconciler"
	"github.com/spire-registrar/spire-registrar/pkg/render"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// entryController adapts the entry controller to the Controller interface.
type entryController struct {
	*entry.Controller
}

func (entryController) Name() string { return entry.ControllerName }

func newEntryController(ctx context.Context, cc ControllerContext) (Controller, error) {
	cfg := cc.Config
	var statics spireinformers.ClusterStaticEntryInformer
	if cc.StaticSource != nil {
		statics = cc.StaticSource.ClusterStaticEntries()
	} else {
		registerClusterStaticEntryInformer(cc)
		statics = cc.SpireInformers.Spire().V1alpha1().ClusterStaticEntries()
	}
	opts := entryOptions(cfg, cc.DryRun, keepIDs(cc.SPIREIdentity))
	if opts.SkipClusterSPIFFEIDs {
		// Without ClusterSPIFFEIDs nothing reads pods: their informers are not even created.
		c, err := entry.NewController(ctx, nil, nil, nil, nil, nil, statics, cc.eventsClient(), nil, cc.SpireAPIClient, cc.SPIRE, opts)
		if err != nil {
			return nil, err
		}
		return entryController{c}, nil
	}
	narrowInformers(cc)
	c, err := entry.NewController(ctx,
		cc.KubeInformers.Core().V1().Pods(),
		cc.KubeInformers.Core().V1().Namespaces(),
		cc.KubeInformers.Core().V1().Nodes(),
		cc.KubeInformers.Discovery().V1().EndpointSlices(),
		cc.SpireInformers.Spire().V1alpha1().ClusterSPIFFEIDs(),
		statics,
		cc.eventsClient(),
		cc.podClient(),
		cc.SpireAPIClient,
		cc.SPIRE,
		opts)
	if err != nil {
		return nil, err
	}
	return entryController{c}, nil
}

// ownIdentity is the SPIFFE ID spire-registrar presents to SPIRE over mTLS, if it does.
func ownIdentity(api spire.API) string {
	if c, ok := api.(*spire.Client); ok {
		return c.Identity
	}
	return ""
}

func keepIDs(id string) []string {
	if id == "" {
		return nil
	}
	return []string{id}
}

// entryOptions are the entry controller's settings from the config. keep are SPIFFE IDs whose
// entries are never deleted: spire-registrar's own, over mTLS.
func entryOptions(cfg *config.Config, dryRun bool, keep []string) entry.Options {
	return entry.Options{
		Options: reconciler.Options{
			EntryIDPrefix:            cfg.EntryIDPrefix,
			EntryIDPrefixCleanup:     cfg.EntryIDPrefixCleanup,
			SkipClusterSPIFFEIDs:     !cfg.Reconcile.ClusterSPIFFEIDs,
			SkipClusterStaticEntries: !cfg.Reconcile.ClusterStaticEntries,
			KeepSPIFFEIDs:            keep,
			// The SPIRE client is spire.DryRun already (see spireChain); the controller must
			// also write no status and no Event.
			DryRun: dryRun,
		},
		Settings:        renderSettings(cfg),
		IgnoreNamespace: cfg.IsNamespaceIgnored,
		Class:           cfg.Class(),
		ResyncInterval:  cfg.GCInterval,
		MaxResyncShare:  cfg.MaxResyncShare,
	}
}

// renderSettings are what the config says entries are rendered with.
func renderSettings(cfg *config.Config) render.Settings {
	return render.Settings{TrustDomain: cfg.TrustDomain, ClusterName: cfg.ClusterName, ClusterDomain: cfg.ClusterDomain,
		ParentIDTemplate: cfg.ParentIDTemplate}
}
