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

package entry

import (
	"context"

	"github.com/spire-registrar/spire-registrar/pkg/controller/runner"
)

func (c *Controller) podWorker(ctx context.Context) {
	runner.Work(ctx, ControllerName, "pod", c.podQueue, c.syncPod)
}

func (c *Controller) clusterSPIFFEIDWorker(ctx context.Context) {
	runner.Work(ctx, ControllerName, "clusterSPIFFEID", c.clusterSPIFFEIDQueue, c.syncClusterSPIFFEID)
}

func (c *Controller) statusWorker(ctx context.Context) {
	runner.Work(ctx, ControllerName, "clusterSPIFFEIDStatus", c.statusQueue, c.syncStatus)
}

func (c *Controller) staticWorker(ctx context.Context) {
	runner.Work(ctx, ControllerName, "clusterStaticEntry", c.staticQueue, c.syncStatic)
}
