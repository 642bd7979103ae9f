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

package podcertificate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/podcert"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// caHolder holds, only in memory, the CA the controller signs with and the authorities SPIRE
// last listed. The CA is renewed at half its life, and at once when the authority it chains
// to is tainted, so that SPIRE's rotation moves pods off that authority as it moves agents'
// SVIDs. Until a renewal succeeds the old CA signs, never past its expiry.
type caHolder struct {
	authority Authority
	ttl       time.Duration

	mu sync.RWMutex
	ca *spire.DownstreamCA
	// authorities are SPIRE's X.509 authorities as last listed.
	authorities []spire.X509Authority
	// lastErr is why the last renewal failed; nil after a success.
	lastErr error
}

func newCAHolder(authority Authority, ttl time.Duration) *caHolder {
	return &caHolder{authority: authority, ttl: ttl}
}

// errNoCA is why a request waits: the holder has no CA that can sign a certificate now.
type errNoCA struct {
	// cause is why the last renewal failed, if one did.
	cause error
}

func (e errNoCA) Error() string {
	if e.cause == nil {
		return "no usable CA yet"
	}
	return "no usable CA: " + e.cause.Error()
}

// Unwrap lets spire.Unreachable see that SPIRE is why the CA is missing.
func (e errNoCA) Unwrap() error { return e.cause }

// first gets the first CA. A refusal because the caller is not downstream is returned, to
// stop start-up; any other failure is left for the resyncs to retry.
func (h *caHolder) first(ctx context.Context) error {
	err := h.renew(ctx)
	if errors.Is(err, spire.ErrNotDownstream) {
		return err
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Getting the pod certificate signer's CA from SPIRE; retrying")
	}
	return nil
}

// renewIfDue records the authorities and renews the CA when there is none, it is past half
// its life, the authority it chains to is tainted, or it could sign a certificate of
// podcert.MinLifetime and no longer can (which comes before half life for a CA SPIRE signed
// for less than twice that). A CA SPIRE signed for less than that to begin with, capped at
// the expiry of SPIRE's own, is renewed at half life only: asking again at once would get
// the same expiry.
func (h *caHolder) renewIfDue(ctx context.Context, now time.Time, authorities []spire.X509Authority) error {
	h.mu.Lock()
	h.authorities = authorities
	ca := h.ca
	h.mu.Unlock()
	switch {
	case ca == nil:
	case !now.Before(ca.RenewAt()):
	case ca.NotAfter().Sub(ca.Chain[0].NotBefore) >= podcert.MinLifetime && ca.NotAfter().Sub(now) < podcert.MinLifetime:
	case chainsToTainted(ca, authorities):
		klog.FromContext(ctx).Info("The authority the pod certificate CA chains to is tainted; renewing the CA")
	default:
		return nil
	}
	return h.renew(ctx)
}

// renew asks SPIRE for a new CA and keeps it.
func (h *caHolder) renew(ctx context.Context) error {
	ca, err := h.authority.NewDownstreamX509CA(ctx, h.ttl)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		metrics.PodCertificateCARenewals.WithLabelValues("error").Inc()
		h.lastErr = err
		return fmt.Errorf("renewing the pod certificate CA: %w", err)
	}
	metrics.PodCertificateCARenewals.WithLabelValues("success").Inc()
	metrics.PodCertificateCAExpiry.WithLabelValues().Set(float64(ca.NotAfter().Unix()))
	klog.FromContext(ctx).Info("Got a pod certificate CA from SPIRE", "subjectKeyID", fmt.Sprintf("%x", ca.Chain[0].SubjectKeyId),
		"notAfter", ca.NotAfter(), "renewAt", ca.RenewAt())
	h.ca, h.lastErr = ca, nil
	return nil
}

// signer returns the CA to sign a certificate with at now: one that covers at least
// podcert.MinLifetime more, or an errNoCA. When a CA is held but expires too soon, the
// errNoCA wraps podcert.ErrCATooShort (and why the last renewal failed, if it did), so that a
// request failed for waiting too long says the CA expired rather than that SPIRE is down.
func (h *caHolder) signer(now time.Time) (*spire.DownstreamCA, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	switch {
	case h.ca == nil:
		return nil, errNoCA{cause: h.lastErr}
	case h.ca.NotAfter().Sub(now) < podcert.MinLifetime:
		tooShort := fmt.Errorf("%w: it expires at %s", podcert.ErrCATooShort, h.ca.NotAfter().UTC().Format(time.RFC3339))
		return nil, errNoCA{cause: errors.Join(tooShort, h.lastErr)}
	}
	return h.ca, nil
}

// probe succeeds once a request can be signed: the parking's test before it retries the
// requests that waited for a CA.
func (h *caHolder) probe(context.Context) error {
	_, err := h.signer(time.Now())
	return err
}

// currentAuthorities are SPIRE's X.509 authorities as last listed.
func (h *caHolder) currentAuthorities() []spire.X509Authority {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.authorities
}

// chainsToTainted reports whether the CA's chain ends at a tainted authority.
func chainsToTainted(ca *spire.DownstreamCA, authorities []spire.X509Authority) bool {
	top := ca.Chain[len(ca.Chain)-1]
	for _, a := range authorities {
		if a.Tainted && top.CheckSignatureFrom(a.Certificate) == nil {
			return true
		}
	}
	return false
}
