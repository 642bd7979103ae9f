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
	"errors"

	"github.com/spire-registrar/spire-registrar/pkg/static"
)

// RunStatic is the whole life of spire-registrar in static mode: the ClusterStaticEntry and
// ClusterFederatedTrustDomain manifests of cc.Config.StaticManifestPath are the declared
// state, and no Kubernetes API is used. The controllers are built by the same descriptors,
// on the same SPIRE client chain, as in a cluster, with informers fed by the files; with no
// API to write to, status is not kept and Events are logged. cc needs Config and SPIRE (and
// DryRun, DryRunOutput as wanted); its Kubernetes fields are not used. cc.StaticSource, when
// set and not started, is used instead of a source over cc.Config.StaticManifestPath. A
// problem with the manifests found before anything started is returned; later ones are logged
// and keep the file's last good content.
func RunStatic(ctx context.Context, cc ControllerContext, workers int, health *Health) error {
	cfg := cc.Config
	source := cc.StaticSource
	if source == nil {
		if cfg.StaticManifestPath == "" {
			return errors.New("static mode needs staticManifestPath")
		}
		var err error
		source, err = static.NewSource(ctx, cfg.StaticManifestPath, static.Options{
			ExpandEnv:   cfg.ExpandEnvStaticManifests,
			MaxFileSize: cfg.StaticManifestMaxFileSize, MaxTotalSize: cfg.StaticManifestMaxTotalSize,
		})
		if err != nil {
			return err
		}
	}
	cc = ControllerContext{Config: cfg, SPIRE: cc.SPIRE, DryRun: cc.DryRun, DryRunOutput: cc.DryRunOutput, StaticSource: source}
	return run(ctx, cc, workers, health, informerFeed{start: source.Start, shutdown: source.Shutdown})
}
