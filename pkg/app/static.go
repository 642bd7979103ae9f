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
	"fmt"

	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/controller/entry"
	"github.com/spire-registrar/spire-registrar/pkg/controller/federation"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/static"
)

// RunStatic is the whole life of spire-registrar in static mode: the ClusterStaticEntry and
// ClusterFederatedTrustDomain manifests of cfg.StaticManifestPath are the declared state, and
// no Kubernetes API is used. The same controllers run on informers fed by the files; with no
// API to write to, status is not kept and Events are logged. A problem with the manifests
// found before anything started is returned; later ones are logged and keep the file's last
// good content.
func RunStatic(ctx context.Context, cfg *config.Config, api spire.API, dryRun bool, workers int, health *Health) error {
	if cfg.StaticManifestPath == "" {
		return fmt.Errorf("static mode needs staticManifestPath")
	}
	source, err := static.NewSource(cfg.StaticManifestPath, cfg.ExpandEnvStaticManifests, static.DefaultPollInterval)
	if err != nil {
		return err
	}
	named := func(name string) context.Context {
		return klog.NewContext(ctx, klog.LoggerWithName(klog.FromContext(ctx), name))
	}
	var controllers []Controller
	if cfg.Reconcile.ClusterStaticEntries {
		opts := entryOptions(cfg, dryRun)
		opts.IgnoreClusterSPIFFEIDs = true
		c, err := entry.NewController(named(entry.ControllerName), nil, nil, nil, nil, nil, source.ClusterStaticEntries(), nil, nil, api, opts)
		if err != nil {
			return fmt.Errorf("constructing %s: %w", entry.ControllerName, err)
		}
		controllers = append(controllers, entryController{c})
	}
	if cfg.Reconcile.ClusterFederatedTrustDomains {
		c, err := federation.NewController(named(federation.ControllerName), source.ClusterFederatedTrustDomains(), nil, nil, api, federationOptions(cfg))
		if err != nil {
			return fmt.Errorf("constructing %s: %w", federation.ControllerName, err)
		}
		controllers = append(controllers, federationController{c})
	}
	if health != nil {
		health.SetControllers(controllers)
	}
	source.Start(ctx)
	defer source.Shutdown()
	RunControllers(ctx, controllers, workers)
	return nil
}
