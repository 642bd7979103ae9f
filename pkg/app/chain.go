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
	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// spireChain is the SPIRE client every controller gets, built here once for the binary,
// static mode and embedders alike: the caller's client counted by the metrics, then coalesced
// by batching or, in a dry run, with every write answered by the dry-run client, so that a
// context with DryRun can never write to SPIRE. release frees the chain once the controllers
// have stopped, after the writes already sent have ended: a leader releases its lease only
// after that.
//
// An embedder that brings its own batching, to tune or observe it, passes a spire.BatchedAPI:
// it is kept, not batched again, and stays the embedder's to close; the metrics then count
// the controllers' calls rather than the RPCs.
func spireChain(cc ControllerContext) (api spire.API, release func(abort bool)) {
	instrumented := metrics.InstrumentSPIRE(cc.SPIRE)
	if cc.DryRun {
		return spire.DryRun(instrumented, cc.DryRunOutput), func(bool) {}
	}
	if _, batched := cc.SPIRE.(spire.BatchedAPI); batched {
		return instrumented, func(bool) {}
	}
	var opts spire.BatchingOptions
	if cc.Config != nil {
		opts.Spread = cc.Config.WriteSpread
	}
	batched := spire.NewBatchedAPI(instrumented, opts)
	return batched, func(abort bool) {
		if abort {
			batched.Close()
			return
		}
		batched.Drain()
	}
}
