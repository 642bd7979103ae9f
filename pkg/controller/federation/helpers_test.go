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

package federation

import (
	"context"
	"testing"

	"github.com/spire-registrar/spire-registrar/pkg/reconciler/federation/federationtest"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// Short names for the builders every test of this package uses.
var (
	newCA      = federationtest.NewCA
	newJWTKey  = federationtest.NewJWTKey
	bundleDoc  = federationtest.BundleDoc
	cftd       = federationtest.Resource
	webSpec    = federationtest.WebSpec
	spiffeSpec = federationtest.SPIFFESpec
)

// dial connects to a SPIRE server's socket, fake or real, for the rest of the test.
func dial(ctx context.Context, t *testing.T, socketPath string) *spire.Client {
	t.Helper()
	client, err := spire.Dial(ctx, socketPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}
