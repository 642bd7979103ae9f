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

package explain

import (
	"cmp"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/podcert"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// States of a pod certificate: its request's outcome, or why there is none. They are part of
// explain's stable JSON output.
const (
	// CertificateIssued: the signer issued the request.
	CertificateIssued = "Issued"
	// CertificateDenied: the signer denied the request; the kubelet does not ask again for
	// this pod's volume.
	CertificateDenied = "Denied"
	// CertificateFailed: the signer failed the request; final for the kubelet too.
	CertificateFailed = "Failed"
	// CertificatePending: the request has no outcome yet.
	CertificatePending = "Pending"
	// CertificateNoRequest: the pod has no request for the volume's signer.
	CertificateNoRequest = "NoRequest"
)

// PodCertificate explains one podCertificate projection of a pod, or one request: its
// outcome, and the identity the signer gives the pod.
type PodCertificate struct {
	// Pod is "namespace/name".
	Pod string `json:"pod"`
	// Volume is the pod's volume holding the podCertificate projection; empty when a request
	// is explained on its own.
	Volume string `json:"volume,omitempty"`
	// SignerName is the signer the projection or request names.
	SignerName string `json:"signerName"`
	// Request is the newest request of the pod for the signer, "namespace/name".
	Request string `json:"request,omitempty"`
	// State is one of Issued, Denied, Failed, Pending, NoRequest; Reason and Message are the
	// request's condition's, or, for Pending and NoRequest, what the signer would decide now.
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Certificate is the issued certificate's identity; nil unless Issued.
	Certificate *IssuedCertificate `json:"certificate,omitempty"`
	// Identity is what the signer would issue the pod now: from its ClusterSPIFFEIDs, as the
	// signer renders it; nil when none gives it one, IdentityProblem then saying why.
	Identity        *PodIdentity `json:"identity,omitempty"`
	IdentityProblem string       `json:"identityProblem,omitempty"`
	// Notes are facts that explain the answer.
	Notes []string `json:"notes,omitempty"`
	// Summary is the answer in a sentence.
	Summary string `json:"summary"`
}

// IssuedCertificate is what an issued certificate says.
type IssuedCertificate struct {
	SPIFFEID string   `json:"spiffeID"`
	DNSNames []string `json:"dnsNames,omitempty"`
	NotAfter string   `json:"notAfter"`
	// ClusterSPIFFEID is the ClusterSPIFFEID that renders this SPIFFE ID for the pod now;
	// empty when none does any more.
	ClusterSPIFFEID string `json:"clusterSPIFFEID,omitempty"`
}

// PodIdentity is the identity a ClusterSPIFFEID gives a pod's certificate.
type PodIdentity struct {
	ClusterSPIFFEID string   `json:"clusterSPIFFEID"`
	SPIFFEID        string   `json:"spiffeID"`
	DNSNames        []string `json:"dnsNames,omitempty"`
}

// PodCertificateInput is what explaining a pod's certificates takes: the pod's input, and
// its PodCertificateRequests (any others are ignored).
type PodCertificateInput struct {
	PodInput
	Requests []*certificatesv1.PodCertificateRequest
	// PodGone is set when the pod a request names does not exist; PodInput then holds only
	// its namespace, name and UID.
	PodGone bool
}

// PodCertificates explains each podCertificate projection of the pod's volumes, or only
// those of volume when it is not empty.
func (x *Explainer) PodCertificates(in PodCertificateInput, volume string) ([]*PodCertificate, error) {
	var out []*PodCertificate
	for _, v := range in.Pod.Spec.Volumes {
		if v.Projected == nil || (volume != "" && v.Name != volume) {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.PodCertificate == nil {
				continue
			}
			req := newestRequest(in.Requests, in.Pod, s.PodCertificate.SignerName)
			answer := x.podCertificate(in, req, s.PodCertificate.SignerName)
			answer.Volume = v.Name
			out = append(out, answer)
		}
	}
	if len(out) == 0 {
		if volume != "" {
			return nil, fmt.Errorf("pod %s/%s has no projected volume %s with a podCertificate source", in.Pod.Namespace, in.Pod.Name, volume)
		}
		return nil, fmt.Errorf("pod %s/%s mounts no podCertificate projection", in.Pod.Namespace, in.Pod.Name)
	}
	return out, nil
}

// PodCertificateRequest explains one request, with its pod's input.
func (x *Explainer) PodCertificateRequest(in PodCertificateInput, req *certificatesv1.PodCertificateRequest) *PodCertificate {
	return x.podCertificate(in, req, req.Spec.SignerName)
}

// newestRequest is the pod's newest request for signer, nil when there is none.
func newestRequest(requests []*certificatesv1.PodCertificateRequest, pod *corev1.Pod, signer string) *certificatesv1.PodCertificateRequest {
	var newest *certificatesv1.PodCertificateRequest
	for _, r := range requests {
		if r.Namespace != pod.Namespace || r.Spec.PodUID != pod.UID || r.Spec.SignerName != signer {
			continue
		}
		if newest == nil || cmp.Or(r.CreationTimestamp.Compare(newest.CreationTimestamp.Time), strings.Compare(r.Name, newest.Name)) > 0 {
			newest = r
		}
	}
	return newest
}

// podCertificate explains req (nil: none) of the pod for signer.
func (x *Explainer) podCertificate(in PodCertificateInput, req *certificatesv1.PodCertificateRequest, signer string) *PodCertificate {
	pod := in.Pod
	out := &PodCertificate{Pod: pod.Namespace + "/" + pod.Name, SignerName: signer}
	cfg := x.cfg.PodCertificates
	ours := cfg.Enabled && signer == cfg.SignerName
	switch {
	case !cfg.Enabled:
		out.Notes = append(out.Notes, "podCertificates.enabled is false in this config: this spire-registrar signs no pod certificate")
	case signer != cfg.SignerName:
		out.Notes = append(out.Notes, fmt.Sprintf("signer %s is not this spire-registrar's (podCertificates.signerName is %s): another signer decides", signer, cfg.SignerName))
	}
	named := ""
	if req != nil {
		named = req.Spec.UnverifiedUserAnnotations[podcert.AnnotationClusterSPIFFEID]
	}
	switch {
	case in.PodGone:
		out.Notes = append(out.Notes, "the pod does not exist: a pending request is denied PodNotFound")
	case ours:
		out.Identity, out.IdentityProblem = x.podCertificateIdentity(in.PodInput, named)
	}
	if req == nil {
		out.State = CertificateNoRequest
		out.Notes = append(out.Notes, "no PodCertificateRequest of the pod names the signer: the kubelet has not asked yet, or kube-controller-manager deleted its requests (15 minutes after their creation); the kubelet keeps an issued certificate and asks again when it is due for refresh")
		out.Summary = summarizeCertificate(out, ours)
		return out
	}
	out.Request = req.Namespace + "/" + req.Name
	out.State, out.Reason, out.Message = requestOutcome(req)
	if out.State == CertificateIssued {
		out.Certificate = issuedCertificate(req.Status.CertificateChain)
		if out.Certificate != nil && out.Identity != nil && out.Identity.SPIFFEID == out.Certificate.SPIFFEID {
			out.Certificate.ClusterSPIFFEID = out.Identity.ClusterSPIFFEID
		}
		if out.Certificate != nil && ours && (out.Identity == nil || out.Identity.SPIFFEID != out.Certificate.SPIFFEID) {
			out.Notes = append(out.Notes, "the pod's ClusterSPIFFEIDs no longer give it the certificate's SPIFFE ID: its next refresh gets what they give now")
		}
	}
	if req.Spec.PodUID != pod.UID {
		out.Notes = append(out.Notes, fmt.Sprintf("the request names pod UID %s, not this pod's %s", req.Spec.PodUID, pod.UID))
	}
	out.Summary = summarizeCertificate(out, ours)
	return out
}

// requestOutcome is the state of req, with its terminal condition's reason and message.
func requestOutcome(req *certificatesv1.PodCertificateRequest) (state, reason, message string) {
	for _, c := range req.Status.Conditions {
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeIssued:
			return CertificateIssued, c.Reason, c.Message
		case certificatesv1.PodCertificateRequestConditionTypeDenied:
			return CertificateDenied, c.Reason, c.Message
		case certificatesv1.PodCertificateRequestConditionTypeFailed:
			return CertificateFailed, c.Reason, c.Message
		}
	}
	return CertificatePending, "", ""
}

// issuedCertificate reads the leaf of an issued chain; nil when it does not parse.
func issuedCertificate(chainPEM string) *IssuedCertificate {
	block, _ := pem.Decode([]byte(chainPEM))
	if block == nil {
		return nil
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil || len(leaf.URIs) == 0 {
		return nil
	}
	return &IssuedCertificate{SPIFFEID: leaf.URIs[0].String(), DNSNames: leaf.DNSNames, NotAfter: leaf.NotAfter.UTC().Format("2006-01-02T15:04:05Z")}
}

// podCertificateIdentity is the identity the signer gives the pod now, by its rule (see the
// pod certificate controller's identityOf): the entry of the ClusterSPIFFEID named, or else
// the first of the most preferred ClusterSPIFFEID of the class that renders one for the pod.
func (x *Explainer) podCertificateIdentity(in PodInput, named string) (*PodIdentity, string) {
	pod := in.Pod
	if x.cfg.IsNamespaceIgnored(pod.Namespace) {
		return nil, x.ignoredMessage(pod.Namespace) + ": denied NoIdentity"
	}
	if !render.PodDeclaresEntries(pod) {
		return nil, fmt.Sprintf("the pod has finished (phase %s): denied PodFinished", pod.Status.Phase)
	}
	if pod.DeletionTimestamp != nil {
		return nil, "the pod is being deleted: denied PodDeleting"
	}
	var active []*render.ClusterSPIFFEID
	for _, c := range in.ClusterSPIFFEIDs {
		if x.signerSees(c) {
			active = append(active, render.CompileClusterSPIFFEID(c))
		}
	}
	render.SortByPreference(active)
	declared, failures := x.renderer.PodEntries(active, pod, in.Namespace, in.Node, in.EndpointSlices)
	for _, d := range declared {
		if named != "" && d.Declarer.Name != named {
			continue
		}
		// SPIRE's rules for a workload's ID, as the signer applies them (its own ID is not
		// known here).
		if id, err := spiffeid.FromString(render.SPIFFEIDString(d.Entry.GetSpiffeId())); err == nil {
			rules := podcert.IdentityRules{AllowAdmin: x.cfg.PodCertificates.AllowAdminIdentities, AllowDownstream: x.cfg.PodCertificates.AllowDownstreamIdentities}
			if denial := podcert.CheckIdentity(podcert.Identity{ClusterSPIFFEID: d.Declarer.Name, SPIFFEID: id,
				Admin: d.Entry.GetAdmin(), Downstream: d.Entry.GetDownstream()}, rules); denial != nil {
				return nil, denial.Message + ": denied " + string(denial.Reason)
			}
		}
		return &PodIdentity{ClusterSPIFFEID: d.Declarer.Name, SPIFFEID: render.SPIFFEIDString(d.Entry.GetSpiffeId()), DNSNames: d.Entry.GetDnsNames()}, ""
	}
	var why []string
	for _, f := range failures {
		if named == "" || f.ClusterSPIFFEID.Name == named {
			why = append(why, fmt.Sprintf("ClusterSPIFFEID %s: %v", f.ClusterSPIFFEID.Name, f.Err))
		}
	}
	switch {
	case named != "" && len(why) > 0:
		return nil, fmt.Sprintf("ClusterSPIFFEID %s, which the request names, renders no identity for the pod: %s: %s", named, strings.Join(why, "; "), x.deniedAfterWait("ClusterSPIFFEIDNotApplicable"))
	case named != "":
		return nil, fmt.Sprintf("ClusterSPIFFEID %s, which the request names, does not exist, is not of the class, or does not select the pod: %s", named, x.deniedAfterWait("ClusterSPIFFEIDNotApplicable"))
	case len(why) > 0:
		return nil, fmt.Sprintf("no ClusterSPIFFEID renders an identity for the pod: %s: %s", strings.Join(why, "; "), x.deniedAfterWait("NoIdentity"))
	}
	return nil, "no ClusterSPIFFEID of the class selects the pod (`explain pod` says why each does not): " + x.deniedAfterWait("NoIdentity")
}

// deniedAfterWait says when the signer denies a request whose pod has no identity: once it has
// waited podCertificates.waitForIdentity for one, as the pod certificate controller does.
func (x *Explainer) deniedAfterWait(reason string) string {
	wait := x.cfg.PodCertificates.WaitForIdentity
	if wait <= 0 {
		return "denied " + reason
	}
	return fmt.Sprintf("denied %s once the request has waited podCertificates.waitForIdentity (%s) for one", reason, wait)
}

// signerSees reports whether the signer renders pods with c: c is of the class, and has the
// labels of clusterSPIFFEIDLabelSelector.
func (x *Explainer) signerSees(c *spirev1alpha1.ClusterSPIFFEID) bool {
	if !x.cfg.Class().Matches(c.Spec.ClassName) {
		return false
	}
	return len(x.cfg.ClusterSPIFFEIDLabels) == 0 || labels.SelectorFromSet(x.cfg.ClusterSPIFFEIDLabels).Matches(labels.Set(c.Labels))
}

// summarizeCertificate says the answer in a sentence.
func summarizeCertificate(p *PodCertificate, ours bool) string {
	switch p.State {
	case CertificateIssued:
		if p.Certificate == nil {
			return fmt.Sprintf("Issued by %s (the certificate does not parse as an X509-SVID).", p.SignerName)
		}
		from := ""
		if p.Certificate.ClusterSPIFFEID != "" {
			from = " from ClusterSPIFFEID " + p.Certificate.ClusterSPIFFEID
		}
		return fmt.Sprintf("Issued %s%s, valid until %s.", p.Certificate.SPIFFEID, from, p.Certificate.NotAfter)
	case CertificateDenied, CertificateFailed:
		return fmt.Sprintf("%s (%s): %s The kubelet does not ask again for this volume; the pod must be replaced.", p.State, p.Reason, strings.TrimSuffix(p.Message, ".")+".")
	}
	waiting := "Waiting for the signer"
	if p.State == CertificateNoRequest {
		waiting = "No request yet"
	}
	switch {
	case !ours:
		return waiting + "; this spire-registrar does not sign for " + p.SignerName + "."
	case p.Identity != nil:
		return fmt.Sprintf("%s; it would issue %s from ClusterSPIFFEID %s.", waiting, p.Identity.SPIFFEID, p.Identity.ClusterSPIFFEID)
	}
	return fmt.Sprintf("%s; it would not issue: %s.", waiting, p.IdentityProblem)
}
