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
	"testing"
	"time"

	"github.com/spire-registrar/spire-registrar/pkg/config"
)

// TestFederationOptionsCarryTheResyncPacing: the federation controller rests between full
// resyncs as the entry controller does, by gcInterval and --max-resync-share.
func TestFederationOptionsCarryTheResyncPacing(t *testing.T) {
	cfg := &config.Config{GCInterval: 7 * time.Second, MaxResyncShare: 0.25}
	fed, ent := federationOptions(cfg, false), entryOptions(cfg, false, nil)
	if fed.ResyncInterval != cfg.GCInterval || fed.MaxResyncShare != cfg.MaxResyncShare {
		t.Errorf("federation controller: interval %v, share %v; want %v, %v", fed.ResyncInterval, fed.MaxResyncShare, cfg.GCInterval, cfg.MaxResyncShare)
	}
	if ent.ResyncInterval != fed.ResyncInterval || ent.MaxResyncShare != fed.MaxResyncShare {
		t.Errorf("entry controller paces resyncs by %v, %v; federation controller by %v, %v",
			ent.ResyncInterval, ent.MaxResyncShare, fed.ResyncInterval, fed.MaxResyncShare)
	}
}
