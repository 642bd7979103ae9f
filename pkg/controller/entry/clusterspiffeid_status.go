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
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/controller/runner"
	"github.com/spire-registrar/spire-registrar/pkg/metrics"
)

const (
	// statusDelay batches status writes: a ClusterSPIFFEID that selects thousands of pods gets
	// one status update for a burst of pod syncs, not one per pod.
	statusDelay = time.Second

	// statusShare bounds the share of one core that ClusterSPIFFEID status syncs may take when
	// pod syncs change their counters. Each sync counts the pods its ClusterSPIFFEID selects
	// from the listers, tens of milliseconds at 30k pods, and during a bulk every
	// ClusterSPIFFEID's counters change all the time: at a fixed second, ten of them took half
	// the controller's CPU in the first two minutes of a 300k-entry bulk, on the cores SPIRE
	// needed to create entries.
	statusShare = 0.05
)

// clusterSPIFFEIDStatus queues, paces and writes the status of ClusterSPIFFEIDs. A counter
// change waits statusDelay, or longer when the counting of all ClusterSPIFFEIDs together
// would take more than statusShare of that wait; a change of the ClusterSPIFFEID itself is
// not paced.
type clusterSPIFFEIDStatus struct {
	// queue holds the names whose status may be out of date.
	queue  workqueue.TypedRateLimitingInterface[string]
	writer *runner.StatusWriter[*spirev1alpha1.ClusterSPIFFEID]

	mu sync.Mutex
	// cost is what counting each ClusterSPIFFEID's status took last.
	cost map[string]time.Duration
}

func newClusterSPIFFEIDStatus(writer *runner.StatusWriter[*spirev1alpha1.ClusterSPIFFEID]) *clusterSPIFFEIDStatus {
	return &clusterSPIFFEIDStatus{
		queue:  runner.NewQueue[string]("spire_registrar_clusterspiffeid_status", 50, 500),
		writer: writer,
		cost:   map[string]time.Duration{},
	}
}

// enqueueNow schedules the status of a ClusterSPIFFEID that changed itself.
func (s *clusterSPIFFEIDStatus) enqueueNow(obj any) {
	if clusterSPIFFEID, ok := runner.Unwrap[*spirev1alpha1.ClusterSPIFFEID](obj); ok {
		s.queue.AddAfter(clusterSPIFFEID.Name, statusDelay)
	}
}

// enqueuePaced schedules the status of ClusterSPIFFEIDs whose counters changed, paced by
// what counting them costs.
func (s *clusterSPIFFEIDStatus) enqueuePaced(names []string) {
	if len(names) == 0 {
		return
	}
	delay := s.delay()
	for _, name := range names {
		s.queue.AddAfter(name, delay)
	}
}

// observe records what counting a ClusterSPIFFEID's status took.
func (s *clusterSPIFFEIDStatus) observe(name string, took time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cost[name] = took
}

// forget drops a ClusterSPIFFEID that is gone or not this controller's: its cost and its
// entry counts.
func (s *clusterSPIFFEIDStatus) forget(name string) {
	s.mu.Lock()
	delete(s.cost, name)
	s.mu.Unlock()
	metrics.ClusterSPIFFEIDEntries.DeletePartialMatch(map[string]string{"clusterspiffeid": name})
}

// delay is how long a counter change waits for its status sync.
func (s *clusterSPIFFEIDStatus) delay() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var total time.Duration
	for _, took := range s.cost {
		total += took
	}
	return max(statusDelay, time.Duration(float64(total)/statusShare))
}

// write writes a ClusterSPIFFEID's stats and Ready condition when they changed.
func (s *clusterSPIFFEIDStatus) write(ctx context.Context, clusterSPIFFEID *spirev1alpha1.ClusterSPIFFEID, stats spirev1alpha1.ClusterSPIFFEIDStats, ready metav1.Condition) error {
	_, err := s.writer.Write(ctx, clusterSPIFFEID, func(updated *spirev1alpha1.ClusterSPIFFEID) { updated.Status.Stats = stats }, ready)
	return err
}
