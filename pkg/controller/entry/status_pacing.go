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
	"sync"
	"time"
)

// statusShare bounds the share of one core that ClusterSPIFFEID status syncs may take when
// pod syncs change their counters. Each sync counts the pods its ClusterSPIFFEID selects from
// the listers, tens of milliseconds at 30k pods, and during a bulk every ClusterSPIFFEID's
// counters change all the time: at a fixed second, ten of them took half the controller's CPU
// in the first two minutes of a 300k-entry bulk, on the cores SPIRE needed to create entries.
const statusShare = 0.05

// statusPacer spaces status syncs by what they last cost: a counter change waits statusDelay,
// or longer when the counting of all ClusterSPIFFEIDs together would take more than
// statusShare of that wait. A change of the ClusterSPIFFEID itself is not paced.
type statusPacer struct {
	mu   sync.Mutex
	cost map[string]time.Duration
}

func newStatusPacer() *statusPacer {
	return &statusPacer{cost: map[string]time.Duration{}}
}

// observe records what counting a ClusterSPIFFEID's status took.
func (p *statusPacer) observe(name string, took time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cost[name] = took
}

// forget drops a ClusterSPIFFEID that is gone or not ours.
func (p *statusPacer) forget(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.cost, name)
}

// delay is how long a counter change waits for its status sync.
func (p *statusPacer) delay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var total time.Duration
	for _, took := range p.cost {
		total += took
	}
	return max(statusDelay, time.Duration(float64(total)/statusShare))
}
