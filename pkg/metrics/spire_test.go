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

package metrics

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"

	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/spire/spiretest"
)

// reportedReachable reports spire_registrar_spire_reachable as Registry holds it, and whether
// it is there.
func reportedReachable(t *testing.T) (float64, bool) {
	t.Helper()
	families, err := Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "spire_registrar_spire_reachable" {
			return f.GetMetric()[0].GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// TestSPIREReachable: spire_registrar_spire_reachable is absent until the binary reports its
// client's reachability, then 0 from a failure to reach SPIRE until SPIRE answers again.
func TestSPIREReachable(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	if v, ok := reportedReachable(t); ok {
		t.Fatalf("spire_registrar_spire_reachable = %v before any client was reported, want it absent", v)
	}
	server := spiretest.New(t)
	client, err := spire.Dial(ctx, server.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ReportSPIREReachability(client.Reachability())
	defer ReportSPIREReachability(nil)
	expect := func(what string, want float64) {
		t.Helper()
		if v, ok := reportedReachable(t); !ok || v != want {
			t.Errorf("%s: spire_registrar_spire_reachable = %v (present: %v), want %v", what, v, ok, want)
		}
	}
	if err := client.Probe(ctx); err != nil {
		t.Fatal(err)
	}
	expect("SPIRE answering", 1)
	server.Stop()
	if err := client.Probe(ctx); err == nil {
		t.Fatal("a probe of a stopped server succeeded")
	}
	expect("SPIRE stopped", 0)
	server.Start()
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		return client.Probe(ctx) == nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	expect("SPIRE back", 1)
}
