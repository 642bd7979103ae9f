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

package entry_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// The real kube-apiserver is shared by the package's integration tests: each test gets its
// own SPIRE server, namespaces, nodes and controller class, so tests never see each other's
// entries. It starts on first use, so unit tests alone (-short) never start it.
var (
	sharedKubeOnce sync.Once
	sharedKube     *realcluster.Kube
	sharedKubeErr  error
)

func realKube(t *testing.T) *realcluster.Kube {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the real kube-apiserver and spire-server; skipped with -short")
	}
	sharedKubeOnce.Do(func() {
		ctx := context.Background()
		sharedKube, sharedKubeErr = realcluster.StartKube(ctx, realcluster.KubeOptions{Logf: func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, format+"\n", args...)
		}})
		if sharedKubeErr != nil {
			return
		}
		dir, err := realcluster.CRDsDir()
		if err != nil {
			sharedKubeErr = err
			return
		}
		_, sharedKubeErr = realcluster.ApplyCRDs(ctx, sharedKube.RESTConfig(), dir)
	})
	if sharedKubeErr != nil {
		t.Fatalf("starting the real kube-apiserver: %v", sharedKubeErr)
	}
	return sharedKube
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedKube != nil {
		_ = sharedKube.Stop()
	}
	os.Exit(code)
}
