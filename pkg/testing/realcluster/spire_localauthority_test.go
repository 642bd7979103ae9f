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

package realcluster

import (
	"encoding/hex"
	"strings"
	"testing"
	"time"
)

// TestSPIRELocalAuthorityX509Rotation walks a real spire-server's X.509 CA
// through prepare, activate, taint and revoke, checking the slots
// `localauthority x509 show` reports and the bundle `bundle show` prints
// after each step.
func TestSPIRELocalAuthorityX509Rotation(t *testing.T) {
	skipIfShort(t)
	ctx := t.Context()
	start := time.Now()
	spire := NewSPIRE(t, SPIREOptions{})
	defer func() { t.Logf("test took %s with start-up", time.Since(start).Round(time.Millisecond)) }()

	show := func(t *testing.T) LocalX509Authorities {
		t.Helper()
		a, err := spire.LocalAuthorityX509Show(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	// bundle returns the bundle's authorities by authority ID, with their taint.
	bundle := func(t *testing.T) map[string]bool {
		t.Helper()
		auths, err := spire.BundleX509Authorities(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, a := range auths {
			out[hex.EncodeToString(a.Certificate.SubjectKeyId)] = a.Tainted
		}
		return out
	}
	id := func(a *LocalAuthority) string {
		if a == nil {
			return ""
		}
		return a.ID
	}
	act := func(t *testing.T, action, authorityID string) LocalAuthority {
		t.Helper()
		a, err := spire.LocalAuthorityX509(ctx, action, authorityID)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}

	first := show(t)
	if first.Active == nil || first.Prepared != nil || first.Old != nil {
		t.Fatalf("a fresh server's authorities: active %q, prepared %q, old %q", id(first.Active), id(first.Prepared), id(first.Old))
	}
	if b := bundle(t); len(b) != 1 || b[first.Active.ID] {
		t.Fatalf("fresh bundle %v; want only the active authority %s, untainted", b, first.Active.ID)
	}
	if first.Active.ExpiresAt <= time.Now().Unix() {
		t.Errorf("active authority expires at %d, in the past", first.Active.ExpiresAt)
	}

	prepared := act(t, LocalAuthorityPrepare, "")
	if got := show(t); id(got.Active) != first.Active.ID || id(got.Prepared) != prepared.ID || got.Old != nil {
		t.Fatalf("after prepare: active %q, prepared %q, old %q; want %s, %s, none", id(got.Active), id(got.Prepared), id(got.Old), first.Active.ID, prepared.ID)
	}
	if b := bundle(t); len(b) != 2 || b[first.Active.ID] || b[prepared.ID] {
		t.Fatalf("bundle after prepare %v; want %s and %s, neither tainted", b, first.Active.ID, prepared.ID)
	}

	if activated := act(t, LocalAuthorityActivate, prepared.ID); activated.ID != prepared.ID {
		t.Fatalf("activate %s activated %s", prepared.ID, activated.ID)
	}
	if got := show(t); id(got.Active) != prepared.ID || got.Prepared != nil || id(got.Old) != first.Active.ID {
		t.Fatalf("after activate: active %q, prepared %q, old %q; want %s, none, %s", id(got.Active), id(got.Prepared), id(got.Old), prepared.ID, first.Active.ID)
	}

	if _, err := spire.LocalAuthorityX509(ctx, LocalAuthorityTaint, prepared.ID); err == nil {
		t.Fatal("tainting the active authority: no error")
	} else {
		t.Logf("tainting the active authority is refused: %v", err)
	}
	if tainted := act(t, LocalAuthorityTaint, first.Active.ID); tainted.ID != first.Active.ID {
		t.Fatalf("taint %s tainted %s", first.Active.ID, tainted.ID)
	}
	if b := bundle(t); len(b) != 2 || !b[first.Active.ID] || b[prepared.ID] {
		t.Fatalf("bundle after taint %v; want %s tainted and %s not", b, first.Active.ID, prepared.ID)
	}

	if revoked := act(t, LocalAuthorityRevoke, first.Active.ID); revoked.ID != first.Active.ID {
		t.Fatalf("revoke %s revoked %s", first.Active.ID, revoked.ID)
	}
	if b := bundle(t); len(b) != 1 || b[prepared.ID] {
		t.Fatalf("bundle after revoke %v; want only %s, untainted", b, prepared.ID)
	}

	for _, bad := range []struct{ action, id string }{{"rotate", ""}, {LocalAuthorityPrepare, "x"}, {LocalAuthorityTaint, ""}} {
		if _, err := spire.LocalAuthorityX509(ctx, bad.action, bad.id); err == nil {
			t.Errorf("LocalAuthorityX509(%q, %q): no error", bad.action, bad.id)
		}
	}

	// The flag that makes an entry's SVID fit to call NewDownstreamX509CA.
	entry, err := spire.CreateEntryCLI(ctx, EntrySpec{
		SPIFFEID: "spiffe://example.org/pod-certificate-signer", ParentID: "spiffe://example.org/spire/agent/x",
		Selectors: []string{"unix:uid:0"}, ExtraFlags: []string{"-admin", "-downstream"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !entry.Admin || !entry.Downstream {
		t.Fatalf("entry made with -admin -downstream has admin %t, downstream %t", entry.Admin, entry.Downstream)
	}
}

// TestSPIRECATTL starts a real spire-server with a CA TTL of a minute and a half: SPIRE
// accepts it, with a warning that SVIDs may be shorter than their TTL, and its active X.509
// authority lives that long.
func TestSPIRECATTL(t *testing.T) {
	skipIfShort(t)
	const caTTL = 90 * time.Second
	before := time.Now()
	spire := NewSPIRE(t, SPIREOptions{CATTL: caTTL})
	after := time.Now()

	auths, err := spire.BundleX509Authorities(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(auths) != 1 {
		t.Fatalf("bundle has %d X.509 authorities, want 1", len(auths))
	}
	ca := auths[0].Certificate
	// SPIRE dates NotBefore back 10s (credtemplate.NotBeforeCushion) and ends the CA ca_ttl
	// after it made it, some time between starting the process and answering healthcheck.
	if ca.NotAfter.Before(before.Add(caTTL).Truncate(time.Second)) || ca.NotAfter.After(after.Add(caTTL)) {
		t.Errorf("CA valid %s to %s; want it to end %s after a time between %s and %s", ca.NotBefore, ca.NotAfter, caTTL, before, after)
	}
	if got := ca.NotAfter.Sub(ca.NotBefore); got != caTTL+10*time.Second {
		t.Errorf("CA lifetime %s, want ca_ttl %s and SPIRE's 10s backdating", got, caTTL)
	}
	log, err := spire.Log()
	if err != nil {
		t.Fatal(err)
	}
	const warning = "default_x509_svid_ttl is too high for the configured ca_ttl value. SVIDs with shorter lifetimes may be issued"
	if !strings.Contains(log, warning) {
		t.Errorf("the server's log lacks the warning %q", warning)
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "level=warning") {
			t.Logf("spire-server: %s", line)
		}
	}
}

// TestSPIREDiskKeyManagerKeepsCAOnRestart kills and restarts a server with each key manager:
// with DiskKeyManager it comes back with the CA it had, and with the in-memory default it
// mints a new one, which joins the bundle.
func TestSPIREDiskKeyManagerKeepsCAOnRestart(t *testing.T) {
	skipIfShort(t)
	for _, tc := range []struct {
		name string
		disk bool
		// authorities is how many the bundle holds after the restart.
		authorities int
	}{
		{"disk", true, 1},
		{"memory", false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			spire := NewSPIRE(t, SPIREOptions{DiskKeyManager: tc.disk})
			before, err := spire.LocalAuthorityX509Show(ctx)
			if err != nil {
				t.Fatal(err)
			}
			spire.Kill()
			if err := spire.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			after, err := spire.LocalAuthorityX509Show(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if same := after.Active.ID == before.Active.ID; same != tc.disk {
				t.Errorf("active authority %s before the restart, %s after; want the same: %t", before.Active.ID, after.Active.ID, tc.disk)
			}
			auths, err := spire.BundleX509Authorities(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(auths) != tc.authorities {
				t.Errorf("bundle holds %d X.509 authorities after the restart, want %d", len(auths), tc.authorities)
			}
		})
	}
}
