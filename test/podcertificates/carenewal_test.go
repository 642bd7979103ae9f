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

package podcertificates

import (
	"testing"
	"time"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// spireCATTL is the SPIRE server's CA lifetime in TestCARenewsAtHalfLife: short enough that
// half of a downstream CA's life passes within the test. SPIRE warns that SVIDs may be
// shorter than their TTL (realcluster.TestSPIRECATTL): it caps what it signs, downstream CAs
// included, at its active CA's expiry.
const spireCATTL = 90 * time.Second

// notBeforeCushion is how far SPIRE dates a certificate's NotBefore back from when it signs
// it (credtemplate.NotBeforeCushion in SPIRE 1.15.3).
const notBeforeCushion = 10 * time.Second

// TestCARenewsAtHalfLife shows, on spire-registrar's /metrics, that it asks SPIRE for a new
// downstream CA at half of the current one's life, and not before.
//
// SPIRE caps a downstream CA at the expiry of its own active CA, and spire-registrar asks
// for SPIRE's default lifetime (caTTL unset; its minimum of 2h would be capped all the same),
// so every downstream CA ends when SPIRE's active CA ends. A renewal before SPIRE rotated
// would then get a CA with the same expiry, and the expiry gauge could not tell it from the
// old one. So the test rotates SPIRE's CA (prepare, activate) right after spire-registrar got
// its first CA: the renewal, due at half of that first CA's life, gets a CA from the new
// authority, which expires later. That the renewal waits for half life also shows that the
// activation alone does not make spire-registrar renew. No certificate is issued: a CA of
// minutes cannot sign one, since kube-apiserver accepts none shorter than an hour.
func TestCARenewsAtHalfLife(t *testing.T) {
	start := time.Now()
	w := newWorld(t, worldOptions{spireCATTL: spireCATTL})
	ctx := t.Context()
	started := time.Now()
	r := w.start(t)

	// The first CA: spire-registrar asks for it at start, while the test scrapes /metrics.
	before1, after1 := waitMetrics(t, r, time.Minute, "the first CA", func(m map[string]float64) bool { return m[caRenewalsSuccess] >= 1 })
	signedLo := started
	if !before1.at.IsZero() {
		signedLo = before1.at
	}
	notAfter1 := time.Unix(int64(after1.series[caExpiry]), 0)
	// SPIRE signed it between the two scrapes, dating NotBefore back by its cushion; X.509
	// keeps whole seconds, so NotBefore may be up to a second earlier still.
	notBeforeLo := signedLo.Add(-notBeforeCushion).Truncate(time.Second)
	notBeforeHi := after1.at.Add(-notBeforeCushion)
	renewLo := notBeforeLo.Add(notAfter1.Sub(notBeforeLo) / 2)
	renewHi := notBeforeHi.Add(notAfter1.Sub(notBeforeHi) / 2)
	t.Logf("first CA after %s: NotBefore %s–%s, NotAfter %s (SPIRE's CA expiry), so half its life is at %s–%s",
		after1.at.Sub(start).Round(time.Millisecond), notBeforeLo.Format(time.TimeOnly), notBeforeHi.Format("15:04:05.000"),
		notAfter1.Format(time.TimeOnly), renewLo.Format("15:04:05.000"), renewHi.Format("15:04:05.000"))

	prepared, err := w.stack.SPIRE.LocalAuthorityX509(ctx, realcluster.LocalAuthorityPrepare, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.stack.SPIRE.LocalAuthorityX509(ctx, realcluster.LocalAuthorityActivate, prepared.ID); err != nil {
		t.Fatal(err)
	}
	activated := time.Now()
	t.Logf("SPIRE's new authority %s active at %s, expiring %s", prepared.ID, activated.Format(time.TimeOnly), time.Unix(prepared.ExpiresAt, 0).Format(time.TimeOnly))

	before2, after2 := waitMetrics(t, r, time.Until(notAfter1)+10*time.Second, "the renewed CA", func(m map[string]float64) bool { return m[caRenewalsSuccess] >= 2 })
	notAfter2 := time.Unix(int64(after2.series[caExpiry]), 0)
	t.Logf("renewed between %s and %s, %s after SPIRE's activation; the new CA expires %s",
		before2.at.Format("15:04:05.000"), after2.at.Format("15:04:05.000"), after2.at.Sub(activated).Round(time.Millisecond), notAfter2.Format(time.TimeOnly))

	// Never before half life: the controller renews at the first resync at or after it.
	if after2.at.Before(renewLo) {
		t.Errorf("renewed by %s, before half of the first CA's life (%s at the earliest)", after2.at.Format("15:04:05.000"), renewLo.Format("15:04:05.000"))
	}
	// And soon after: the resync that finds the CA due runs every gcInterval (jittered by up
	// to 10%), then the call to SPIRE and the next scrape take their time. Five seconds over a
	// 2.2s resync leave room for a loaded 2-core machine without letting a renewal at three
	// quarters of the life (about 20s later here) pass.
	const late = 5 * time.Second
	if before2.at.After(renewHi.Add(late)) {
		t.Errorf("not renewed by %s, more than %s after half of the first CA's life (%s at the latest)", before2.at.Format("15:04:05.000"), late, renewHi.Format("15:04:05.000"))
	}
	if !notAfter2.After(notAfter1) {
		t.Errorf("the renewed CA expires %s, not after the first (%s)", notAfter2, notAfter1)
	}
	if want := time.Unix(prepared.ExpiresAt, 0); !notAfter2.Equal(want) {
		t.Errorf("the renewed CA expires %s, want the new authority's expiry %s, at which SPIRE caps it", notAfter2, want)
	}
	if n := after2.series[caRenewalsError]; n != 0 {
		t.Errorf("%v failed CA requests", n)
	}
	t.Logf("test took %s", time.Since(start).Round(time.Millisecond))
}
