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
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/spire-registrar/spire-registrar/pkg/config"
)

// Without an agent, DialSPIRE over TCP gives up after svidWaitTimeout with an error that
// names the Workload API socket, instead of starting a controller that has no identity.
func TestDialSPIREOverMTLSWaitsBoundedForAnSVID(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	socket := filepath.Join(t.TempDir(), "no-agent.sock")
	cfg, err := config.Parse([]byte("trustDomain: example.org\nclusterName: c\nspireServerAddress: 127.0.0.1:1\nworkloadAPISocketPath: " + socket + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	old := svidWaitTimeout
	svidWaitTimeout = 300 * time.Millisecond
	defer func() { svidWaitTimeout = old }()

	start := time.Now()
	client, err := DialSPIRE(ctx, cfg)
	if err == nil {
		client.Close()
		t.Fatal("DialSPIRE succeeded without a SPIRE agent")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("DialSPIRE took %s, want about svidWaitTimeout", took)
	}
	if !strings.Contains(err.Error(), "unix://"+socket) || !strings.Contains(err.Error(), "X509-SVID") {
		t.Errorf("error %q does not name the Workload API socket and the missing X509-SVID", err)
	}
}
