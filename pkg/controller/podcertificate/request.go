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
	"crypto"
	"errors"
	"fmt"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/controller/runner"
	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/podcert"
)

// issuedReason is the reason of the Issued condition.
const issuedReason = "Issued"

// issued is a certificate ready to be written to a request's status.
type issued struct {
	chain    string
	validity podcert.Validity
	id       string
}

// errInformerLag is why a request is retried: what the informers hold of its pod or node
// would deny it, but the API server's copies would not.
var errInformerLag = errors.New("the informers have not caught up with the request's pod or node yet")

// syncRequest signs, denies or fails one request. A request that waits for a CA is retried
// once the CA is usable (runner.ErrWaitForProbe), or failed after FailPendingAfter. One whose
// pod has no identity waits for one until WaitForIdentity after its creation, and is denied
// only then.
func (c *Controller) syncRequest(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	req, err := c.requests.PodCertificateRequests(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.waiting.forget(key)
		return nil
	} else if err != nil {
		return fmt.Errorf("getting PodCertificateRequest %s: %w", key, err)
	}
	if req.Spec.SignerName != c.opts.SignerName || ended(req) {
		c.waiting.forget(key)
		return nil
	}
	cert, decision, err := c.decide(ctx, req)
	var noIdentity errNoIdentityYet
	if errors.As(err, &noIdentity) {
		if left := c.identityWaitLeft(req, time.Now()); left > 0 {
			// The queue brings the request back when its wait runs out, and the handlers
			// earlier when something that gives identities changes.
			c.waiting.wait(req, key, noIdentity.denial.Reason)
			c.queue.AddAfter(key, left)
			klog.FromContext(ctx).V(2).Info("Waiting for the pod to get an identity", "podCertificateRequest", klog.KObj(req),
				"denyIn", left, "reason", noIdentity.denial.Reason, "message", noIdentity.denial.Message)
			return nil
		}
		decision, err = noIdentity.denial, nil
	}
	c.waiting.forget(key)
	var noCA errNoCA
	if errors.As(err, &noCA) {
		if d := c.pendingTooLong(req, noCA); d != nil {
			return c.end(ctx, req, d)
		}
		// The parking queues the request again only once the CA is usable: during an outage
		// that may be never, so the request comes back when FailPendingAfter runs out.
		if c.opts.FailPendingAfter > 0 {
			c.queue.AddAfter(key, time.Until(req.CreationTimestamp.Add(c.opts.FailPendingAfter)))
		}
		return fmt.Errorf("%w: %w", runner.ErrWaitForProbe, err)
	}
	switch {
	case err != nil:
		return err
	case decision != nil:
		return c.end(ctx, req, decision)
	}
	return c.issue(ctx, req, cert)
}

// decide returns the certificate for a request, or the decision to deny it, or an error when
// it cannot be decided yet.
func (c *Controller) decide(ctx context.Context, req *certificatesv1.PodCertificateRequest) (*issued, *podcert.Decision, error) {
	named, d := podcert.CheckAnnotations(req.Spec.UnverifiedUserAnnotations)
	if d != nil {
		return nil, d, nil
	}
	pub, d := podcert.PublicKeyOf(req.Spec.StubPKCS10Request)
	if d != nil {
		return nil, d, nil
	}
	pod, _ := c.pods.ByName(req.Namespace, req.Spec.PodName)
	node, err := c.nodeLister.Get(string(req.Spec.NodeName))
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, nil, fmt.Errorf("getting node %s: %w", req.Spec.NodeName, err)
	}
	if d := podcert.CheckRequest(req, podFacts(pod), nodeFacts(node)); d != nil {
		if d.Recheck {
			if err := c.recheck(ctx, req); err != nil {
				return nil, nil, err
			}
		}
		return nil, d, nil
	}
	id, d, err := c.identityOf(ctx, pod, node, named)
	if err != nil || d != nil {
		return nil, d, err
	}
	// Last, as it alone reads the API server: a request it would not issue anyway costs none.
	if d, err := c.lookups.check(ctx, req); err != nil || d != nil {
		return nil, d, err
	}
	return c.sign(req, pub, id)
}

// sign signs the certificate of an identity with the current CA.
func (c *Controller) sign(req *certificatesv1.PodCertificateRequest, pub crypto.PublicKey, id *identity) (*issued, *podcert.Decision, error) {
	now := time.Now()
	ca, err := c.ca.signer(now)
	if err != nil {
		return nil, nil, err
	}
	validity, err := podcert.Lifetime(now, req.Spec.MaxExpirationSeconds, podcert.TTL(id.ttl, c.opts.DefaultTTL, c.opts.MaxTTL), ca.NotAfter())
	if errors.Is(err, podcert.ErrCATooShort) {
		return nil, nil, errNoCA{cause: err}
	} else if err != nil {
		return nil, podcert.Decide(podcert.ReasonSigningFailed, "%v", err), nil
	}
	chain, _, err := podcert.Issue(podcert.CA{Chain: ca.Chain, Key: ca.Key}, pub, id.spiffeID, id.dnsNames, validity)
	if err != nil {
		return nil, podcert.Decide(podcert.ReasonSigningFailed, "%v", err), nil
	}
	return &issued{chain: chain, validity: validity, id: id.spiffeID.String()}, nil, nil
}

// recheck reads the request's pod and node from the API server when the informers' copies
// would deny it: a Denied condition is final, so a lagging informer must not decide it. It
// returns errInformerLag when the API server's copies pass the check.
func (c *Controller) recheck(ctx context.Context, req *certificatesv1.PodCertificateRequest) error {
	pod, err := c.client.CoreV1().Pods(req.Namespace).Get(ctx, req.Spec.PodName, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading pod %s/%s: %w", req.Namespace, req.Spec.PodName, err)
	}
	if err != nil {
		pod = nil
	}
	node, err := c.client.CoreV1().Nodes().Get(ctx, string(req.Spec.NodeName), metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading node %s: %w", req.Spec.NodeName, err)
	}
	if err != nil {
		node = nil
	}
	if podcert.CheckRequest(req, podFacts(pod), nodeFacts(node)) == nil {
		return errInformerLag
	}
	return nil
}

// pendingTooLong returns the decision to fail a request that has waited FailPendingAfter for
// a CA, or nil.
func (c *Controller) pendingTooLong(req *certificatesv1.PodCertificateRequest, noCA errNoCA) *podcert.Decision {
	if c.opts.FailPendingAfter <= 0 || time.Since(req.CreationTimestamp.Time) < c.opts.FailPendingAfter {
		return nil
	}
	reason := podcert.ReasonSPIREUnavailable
	if errors.Is(noCA.cause, podcert.ErrCATooShort) {
		reason = podcert.ReasonCAExpired
	}
	return podcert.Decide(reason, "no CA could sign the certificate for %v: %v", c.opts.FailPendingAfter, noCA)
}

// issue writes an issued certificate to the request's status.
func (c *Controller) issue(ctx context.Context, req *certificatesv1.PodCertificateRequest, cert *issued) error {
	logger := klog.FromContext(ctx)
	if c.opts.DryRun {
		logger.Info("Dry run: would issue", "podCertificateRequest", klog.KObj(req), "spiffeID", cert.id, "notAfter", cert.validity.NotAfter)
		return nil
	}
	updated := req.DeepCopy()
	updated.Status.CertificateChain = cert.chain
	updated.Status.NotBefore = &metav1.Time{Time: cert.validity.NotBefore}
	updated.Status.NotAfter = &metav1.Time{Time: cert.validity.NotAfter}
	updated.Status.BeginRefreshAt = &metav1.Time{Time: cert.validity.BeginRefreshAt}
	updated.Status.Conditions = []metav1.Condition{{
		Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue,
		ObservedGeneration: req.Generation, LastTransitionTime: metav1.Now(), Reason: issuedReason,
		Message: fmt.Sprintf("Issued an X509-SVID for %s, valid until %s", cert.id, cert.validity.NotAfter.Format(time.RFC3339)),
	}}
	if _, err := c.client.CertificatesV1().PodCertificateRequests(req.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing the certificate of PodCertificateRequest %s/%s: %w", req.Namespace, req.Name, err)
	}
	metrics.PodCertificateRequests.WithLabelValues("issued", issuedReason).Inc()
	metrics.PodCertificateIssueLatency.Observe(time.Since(req.CreationTimestamp.Time).Seconds())
	logger.V(2).Info("Issued pod certificate", "podCertificateRequest", klog.KObj(req), "spiffeID", cert.id, "notAfter", cert.validity.NotAfter)
	return nil
}

// end writes a Denied or Failed condition to the request's status.
func (c *Controller) end(ctx context.Context, req *certificatesv1.PodCertificateRequest, d *podcert.Decision) error {
	logger := klog.FromContext(ctx)
	if c.opts.DryRun {
		logger.Info("Dry run: would end", "podCertificateRequest", klog.KObj(req), "condition", d.Type(), "reason", d.Reason, "message", d.Message)
		return nil
	}
	updated := req.DeepCopy()
	updated.Status.Conditions = []metav1.Condition{d.Condition(req.Generation, time.Now())}
	if _, err := c.client.CertificatesV1().PodCertificateRequests(req.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing condition %s of PodCertificateRequest %s/%s: %w", d.Type(), req.Namespace, req.Name, err)
	}
	result := "denied"
	if d.Type() == certificatesv1.PodCertificateRequestConditionTypeFailed {
		result = "failed"
	}
	metrics.PodCertificateRequests.WithLabelValues(result, string(d.Reason)).Inc()
	logger.V(2).Info("Ended pod certificate request", "podCertificateRequest", klog.KObj(req), "condition", d.Type(), "reason", d.Reason, "message", d.Message)
	return nil
}

// ended reports whether a request is Issued, Denied or Failed: its status can no longer change.
func ended(req *certificatesv1.PodCertificateRequest) bool {
	for _, c := range req.Status.Conditions {
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeIssued, certificatesv1.PodCertificateRequestConditionTypeDenied,
			certificatesv1.PodCertificateRequestConditionTypeFailed:
			if c.Status == metav1.ConditionTrue {
				return true
			}
		}
	}
	return false
}

// podFacts is what the request check reads of a pod; nil for none.
func podFacts(pod *corev1.Pod) *podcert.PodFacts {
	if pod == nil {
		return nil
	}
	return &podcert.PodFacts{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, NodeName: pod.Spec.NodeName,
		ServiceAccountName: pod.Spec.ServiceAccountName, Phase: pod.Status.Phase, Deleting: pod.DeletionTimestamp != nil}
}

// nodeFacts is what the request check reads of a node; nil for none.
func nodeFacts(node *corev1.Node) *podcert.NodeFacts {
	if node == nil {
		return nil
	}
	return &podcert.NodeFacts{Name: node.Name, UID: node.UID}
}
