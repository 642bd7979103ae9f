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
	"fmt"
	"time"
)

// The bounds kube-apiserver puts on an issued request's status (k8s.io/kubernetes v1.37.1
// pkg/apis/certificates/validation, ValidatePodCertificateRequestStatusUpdate):
//
//   - status.notBefore and status.notAfter equal the leaf certificate's NotBefore and
//     NotAfter;
//   - status.notBefore is within 5 minutes of the API server's clock (strictly);
//   - the leaf's NotAfter - NotBefore is at least 1 hour and at most
//     spec.maxExpirationSeconds;
//   - status.beginRefreshAt is at least 10 minutes after status.notBefore and at least 10
//     minutes before status.notAfter.
const (
	// MinLifetime is the shortest certificate kube-apiserver accepts.
	MinLifetime = time.Hour
	// DefaultMaxExpirationSeconds is what kube-apiserver defaults spec.maxExpirationSeconds
	// to; Lifetime uses it when the field is unset.
	DefaultMaxExpirationSeconds = 86400
	// refreshMargin is how far status.beginRefreshAt must stay from either end.
	refreshMargin = 10 * time.Minute
	// Backdate is how long before now a certificate becomes valid, for peers whose clocks
	// lag (SPIRE backdates 10 seconds). It is a small part of the 5 minutes by which
	// status.notBefore may differ from the API server's clock, leaving the rest for skew
	// between this controller's clock and the API server's and for the time until the write.
	Backdate = time.Minute
)

// DefaultTTL is the lifetime of a pod certificate whose ClusterSPIFFEID sets no ttl, unless
// podCertificates.defaultTTL says otherwise: SPIRE's default X509-SVID TTL (the server's
// default_x509_svid_ttl), what a spire-agent's SVID for the same entry would live.
const DefaultTTL = time.Hour

// TTL is the lifetime asked for a pod certificate, before Lifetime bounds it by the request
// and the CA: the ClusterSPIFFEID's ttl (entryTTL), or when it sets none defaultTTL
// (DefaultTTL when <= 0), capped at maxTTL when that is positive.
func TTL(entryTTL, defaultTTL, maxTTL time.Duration) time.Duration {
	ttl := entryTTL
	if ttl <= 0 {
		ttl = defaultTTL
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if maxTTL > 0 {
		ttl = min(ttl, maxTTL)
	}
	return ttl
}

// ErrCATooShort is returned by Lifetime when the CA expires less than MinLifetime from now:
// no certificate it signs would be accepted, so the signer waits for a renewed CA.
var ErrCATooShort = errors.New("the CA expires too soon to sign a certificate of the shortest lifetime kube-apiserver accepts")

// Validity is when an issued certificate is valid and when kubelet should start replacing it.
// All three are whole seconds in UTC, since X.509 and metav1.Time carry no fraction: the
// leaf's NotBefore and NotAfter then equal status.notBefore and status.notAfter exactly.
type Validity struct {
	NotBefore, NotAfter, BeginRefreshAt time.Time
}

// Lifetime returns the validity of a certificate issued at now for a request whose
// spec.maxExpirationSeconds is maxExpirationSeconds (DefaultMaxExpirationSeconds when nil),
// with the signer's configured ttl (none when <= 0) and a CA that expires at caNotAfter.
//
// The certificate starts Backdate before now and lasts the shortest of
// maxExpirationSeconds, ttl raised to MinLifetime, and the CA's remaining life: a
// certificate never outlives the CA that signs it. It is never shorter than MinLifetime:
// when the CA expires less than MinLifetime after now, Lifetime returns an error wrapping
// ErrCATooShort. kubelet is asked to begin refreshing half way through.
//
// Call it right before issuing: kube-apiserver refuses a status.notBefore more than 5
// minutes from its clock.
func Lifetime(now time.Time, maxExpirationSeconds *int32, ttl time.Duration, caNotAfter time.Time) (Validity, error) {
	now = now.UTC().Truncate(time.Second)
	maxLifetime := time.Duration(DefaultMaxExpirationSeconds) * time.Second
	if maxExpirationSeconds != nil {
		maxLifetime = time.Duration(*maxExpirationSeconds) * time.Second
	}
	if maxLifetime < MinLifetime {
		return Validity{}, fmt.Errorf("spec.maxExpirationSeconds %v is below the %v every certificate must last", maxLifetime, MinLifetime)
	}
	caNotAfter = caNotAfter.UTC().Truncate(time.Second)
	if caNotAfter.Sub(now) < MinLifetime {
		return Validity{}, fmt.Errorf("%w: it expires at %s, less than %v after %s",
			ErrCATooShort, caNotAfter.Format(time.RFC3339), MinLifetime, now.Format(time.RFC3339))
	}
	notBefore := now.Add(-Backdate)
	lifetime := maxLifetime
	if ttl > 0 {
		lifetime = min(lifetime, max(ttl.Truncate(time.Second), MinLifetime))
	}
	lifetime = min(lifetime, caNotAfter.Sub(notBefore))
	// Half of at least an hour is always refreshMargin or more from either end; the bounds
	// only state the rule.
	refresh := min(max((lifetime/2).Truncate(time.Second), refreshMargin), lifetime-refreshMargin)
	return Validity{
		NotBefore:      notBefore,
		NotAfter:       notBefore.Add(lifetime),
		BeginRefreshAt: notBefore.Add(refresh),
	}, nil
}
