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

package podcert

import (
	"errors"
	"testing"
	"time"

	"k8s.io/utils/ptr"
)

// checkStatusRules applies kube-apiserver's rules on an issued request's times
// (ValidatePodCertificateRequestStatusUpdate) to v, with the API server's clock at now.
func checkStatusRules(t *testing.T, v Validity, now time.Time, maxExpirationSeconds int32) {
	t.Helper()
	for name, tm := range map[string]time.Time{"NotBefore": v.NotBefore, "NotAfter": v.NotAfter, "BeginRefreshAt": v.BeginRefreshAt} {
		if tm.Nanosecond() != 0 || tm.Location() != time.UTC {
			t.Errorf("%s = %v, want whole seconds in UTC", name, tm)
		}
	}
	if !(v.NotBefore.After(now.Add(-5*time.Minute)) && v.NotBefore.Before(now.Add(5*time.Minute))) {
		t.Errorf("NotBefore %v is not within 5 minutes of %v", v.NotBefore, now)
	}
	lifetime := v.NotAfter.Sub(v.NotBefore)
	if lifetime < time.Hour || lifetime > time.Duration(maxExpirationSeconds)*time.Second {
		t.Errorf("lifetime %v is outside [1h, %ds]", lifetime, maxExpirationSeconds)
	}
	if v.BeginRefreshAt.Before(v.NotBefore.Add(10*time.Minute)) || v.BeginRefreshAt.After(v.NotAfter.Add(-10*time.Minute)) {
		t.Errorf("BeginRefreshAt %v is outside [NotBefore+10m, NotAfter-10m] = [%v, %v]",
			v.BeginRefreshAt, v.NotBefore.Add(10*time.Minute), v.NotAfter.Add(-10*time.Minute))
	}
}

func TestLifetime(t *testing.T) {
	// A clock with a fraction of a second, in a zone other than UTC.
	now := time.Date(2026, 11, 27, 12, 0, 0, 700_000_000, time.FixedZone("CET", 3600))
	start := time.Date(2026, 11, 27, 11, 0, 0, 0, time.UTC).Add(-Backdate) // now, whole, UTC, backdated
	farCA := now.Add(30 * 24 * time.Hour)
	for _, tc := range []struct {
		name         string
		max          *int32
		ttl          time.Duration
		caNotAfter   time.Time
		wantLifetime time.Duration
		wantErr      error // ErrCATooShort
		wantOtherErr bool  // an error that does not blame the CA
	}{
		{name: "default max", caNotAfter: farCA, wantLifetime: 24 * time.Hour},
		{name: "max", max: ptr.To[int32](7200), caNotAfter: farCA, wantLifetime: 2 * time.Hour},
		{name: "91 days", max: ptr.To[int32](91 * 86400), caNotAfter: farCA.Add(90 * 24 * time.Hour), wantLifetime: 91 * 24 * time.Hour},
		{name: "ttl under max", max: ptr.To[int32](86400), ttl: 6 * time.Hour, caNotAfter: farCA, wantLifetime: 6 * time.Hour},
		{name: "max under ttl", max: ptr.To[int32](7200), ttl: 6 * time.Hour, caNotAfter: farCA, wantLifetime: 2 * time.Hour},
		{name: "ttl under an hour is raised", ttl: 10 * time.Minute, caNotAfter: farCA, wantLifetime: time.Hour},
		{name: "ttl's fraction dropped", ttl: 90*time.Minute + 500*time.Millisecond, caNotAfter: farCA, wantLifetime: 90 * time.Minute},
		{name: "max of an hour", max: ptr.To[int32](3600), ttl: 6 * time.Hour, caNotAfter: farCA, wantLifetime: time.Hour},
		{
			name: "CA's remaining life under max", ttl: 12 * time.Hour, caNotAfter: now.Add(3 * time.Hour),
			wantLifetime: 3*time.Hour + Backdate, // to the CA's NotAfter
		},
		{
			name: "CA with just an hour left", caNotAfter: now.Truncate(time.Second).Add(time.Hour),
			wantLifetime: time.Hour + Backdate,
		},
		{
			name: "CA's fraction of a second dropped", caNotAfter: now.Truncate(time.Second).Add(2*time.Hour + 500*time.Millisecond),
			wantLifetime: 2*time.Hour + Backdate,
		},
		{name: "CA with under an hour left", caNotAfter: now.Add(59 * time.Minute), wantErr: ErrCATooShort},
		{name: "CA nearly expired", caNotAfter: now.Add(time.Minute), wantErr: ErrCATooShort},
		{name: "CA expired", caNotAfter: now.Add(-time.Hour), wantErr: ErrCATooShort},
		{name: "no CA", wantErr: ErrCATooShort},
		{name: "max under an hour", max: ptr.To[int32](1800), caNotAfter: farCA, wantOtherErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Lifetime(now, tc.max, tc.ttl, tc.caNotAfter)
			if tc.wantErr != nil || tc.wantOtherErr {
				if err == nil {
					t.Fatalf("Lifetime = %+v, want an error", v)
				}
				if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
					t.Errorf("err = %v, want %v", err, tc.wantErr)
				}
				if tc.wantOtherErr && errors.Is(err, ErrCATooShort) {
					t.Errorf("err = %v: blames the CA", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Lifetime: %v", err)
			}
			if !v.NotBefore.Equal(start) {
				t.Errorf("NotBefore = %v, want %v", v.NotBefore, start)
			}
			if got := v.NotAfter.Sub(v.NotBefore); got != tc.wantLifetime {
				t.Errorf("lifetime = %v, want %v", got, tc.wantLifetime)
			}
			if v.NotAfter.After(tc.caNotAfter) {
				t.Errorf("NotAfter %v is after the CA's %v", v.NotAfter, tc.caNotAfter)
			}
			if want := v.NotBefore.Add((v.NotAfter.Sub(v.NotBefore) / 2).Truncate(time.Second)); !v.BeginRefreshAt.Equal(want) {
				t.Errorf("BeginRefreshAt = %v, want half way, %v", v.BeginRefreshAt, want)
			}
			max := int32(DefaultMaxExpirationSeconds)
			if tc.max != nil {
				max = *tc.max
			}
			checkStatusRules(t, v, now, max)
		})
	}
}

// TestTTL: with no ClusterSPIFFEID ttl a pod certificate lives SPIRE's default X509-SVID
// TTL (or podCertificates.defaultTTL), never the request's maxExpirationSeconds, and
// podCertificates.maxTTL caps every lifetime.
func TestTTL(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		entry, defaultTTL, max time.Duration
		want                   time.Duration
	}{
		{name: "no ttl: SPIRE's default", want: time.Hour},
		{name: "no ttl: the configured default", defaultTTL: 4 * time.Hour, want: 4 * time.Hour},
		{name: "the ClusterSPIFFEID's ttl", entry: 90 * time.Minute, defaultTTL: 4 * time.Hour, want: 90 * time.Minute},
		{name: "the ClusterSPIFFEID's ttl capped", entry: 48 * time.Hour, max: 12 * time.Hour, want: 12 * time.Hour},
		{name: "the default capped", defaultTTL: 4 * time.Hour, max: 2 * time.Hour, want: 2 * time.Hour},
		{name: "no cap", entry: 48 * time.Hour, want: 48 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := TTL(tc.entry, tc.defaultTTL, tc.max); got != tc.want {
				t.Errorf("TTL(%v, %v, %v) = %v, want %v", tc.entry, tc.defaultTTL, tc.max, got, tc.want)
			}
		})
	}
	// The whole chain: a request for the default 24h with no ttl gets an hour.
	now := time.Now()
	v, err := Lifetime(now, nil, TTL(0, 0, 0), now.Add(30*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if got := v.NotAfter.Sub(v.NotBefore); got != time.Hour {
		t.Errorf("a request of the default maxExpirationSeconds with no ttl lives %v, want SPIRE's default 1h", got)
	}
}
