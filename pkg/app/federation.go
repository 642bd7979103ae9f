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
	"github.com/spire-registrar/spire-registrar/pkg/controller/federation"
	fedreconciler "github.com/spire-registrar/spire-registrar/pkg/reconciler/federation"
)

// federationController adapts the federation controller to the Controller interface.
type federationController struct {
	*federation.Controller
}

func (federationController) Name() string { return federation.ControllerName }

func newFederationController(ctx context.Context, cc ControllerContext) (Controller, error) {
	var informer spireinformers.ClusterFederatedTrustDomainInformer
	if cc.StaticSource != nil {
		informer = cc.StaticSource.ClusterFederatedTrustDomains()
	} else {
		registerClusterFederatedTrustDomainInformer(cc)
		informer = cc.SpireInformers.Spire().V1alpha1().ClusterFederatedTrustDomains()
	}
	c, err := federation.NewController(ctx,
		informer,
		cc.eventsClient(),
		cc.SpireAPIClient,
		cc.SPIRE,
		federationOptions(cc.Config, cc.DryRun))
	if err != nil {
		return nil, err
	}
	return federationController{c}, nil
}

// federationOptions are the federation controller's settings from the config.
func federationOptions(cfg *config.Config, dryRun bool) federation.Options {
	return federation.Options{
		Options: fedreconciler.Options{
			DryRun:      dryRun,
			TrustDomain: cfg.TrustDomain,
			Class:       cfg.Class(),
			// A class or an entry ID prefix says the SPIRE server has other owners.
			SharedServer: cfg.ClassName != "" || cfg.EntryIDPrefix != "",
		},
		ResyncInterval: cfg.GCInterval,
		MaxResyncShare: cfg.MaxResyncShare,
	}
}
