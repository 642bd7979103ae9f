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
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// The key types a podCertificate projection may ask for, as its keyType
// names them; the kubelet generates a key of that type for each request.
const (
	KeyTypeRSA3072   = "RSA3072"
	KeyTypeRSA4096   = "RSA4096"
	KeyTypeECDSAP256 = "ECDSAP256"
	KeyTypeECDSAP384 = "ECDSAP384"
	KeyTypeECDSAP521 = "ECDSAP521"
	KeyTypeED25519   = "ED25519"
)

const (
	// DefaultPodCertificateLagTimeout is how long RequestPodCertificate retries
	// the refusals that only mean kube-apiserver's informers have not caught up
	// yet, unless told otherwise.
	DefaultPodCertificateLagTimeout = 10 * time.Second

	// podCertificateTimeout bounds WaitPodCertificateIssued: a signer under
	// test answers within seconds.
	podCertificateTimeout = time.Minute
	// kubeletRequestPrefix is the generateName the kubelet gives every request.
	kubeletRequestPrefix = "req-"
)

// PodCertificateRequestOptions says what RequestPodCertificate asks for: what
// the kubelet copies from a pod's podCertificate projection, and how the
// emulation deals with kube-apiserver's informer lag.
type PodCertificateRequestOptions struct {
	// SignerName is spec.signerName. Required.
	SignerName string
	// KeyType is one of the KeyType constants; default KeyTypeECDSAP256.
	KeyType string
	// MaxExpirationSeconds is copied into spec.maxExpirationSeconds as the
	// kubelet copies the projection's; nil lets kube-apiserver default it
	// (86400).
	MaxExpirationSeconds *int32
	// UnverifiedUserAnnotations is copied into spec.unverifiedUserAnnotations
	// as the kubelet copies the projection's userAnnotations.
	UnverifiedUserAnnotations map[string]string
	// ServiceAccountUID, if set, becomes spec.serviceAccountUID as is. If
	// empty, the UID is read as the kubelet reads it: a get of the pod's
	// service account by the node, which the Node authorizer allows for the
	// service accounts of pods bound to it.
	ServiceAccountUID types.UID
	// LagTimeout is how long to retry the refusals that only mean
	// kube-apiserver's informers lag behind objects just written (NodeRestriction
	// answers those with a 500 instead of 403, and the Node authorizer refuses
	// the service account until its graph has the pod); the kubelet retries
	// them too. Default DefaultPodCertificateLagTimeout; negative: one attempt,
	// for tests of a refusal that is meant to stick.
	LagTimeout time.Duration
}

// ProjectionRequestOptions returns the options the kubelet takes from a pod's
// podCertificate projection: signer, key type, maximum lifetime and user
// annotations.
func ProjectionRequestOptions(src *corev1.PodCertificateProjection) PodCertificateRequestOptions {
	return PodCertificateRequestOptions{
		SignerName:                src.SignerName,
		KeyType:                   src.KeyType,
		MaxExpirationSeconds:      src.MaxExpirationSeconds,
		UnverifiedUserAnnotations: src.UserAnnotations,
	}
}

// WithPodCertificateVolume returns a CreatePod mutation that adds a projected
// volume with one podCertificate source. NodeRestriction lets a node request
// a certificate for a pod only from a signer one of its volumes names.
func WithPodCertificateVolume(volumeName string, src corev1.PodCertificateProjection) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{
			Name: volumeName,
			VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{PodCertificate: src.DeepCopy()}},
			}},
		})
	}
}

// RequestPodCertificate does what the kubelet (pkg/kubelet/podcertificate,
// createPodCertificateRequest) does for a pod's podCertificate projection:
// it generates a key of opts.KeyType, a stub PKCS#10 request signed by it
// with an empty subject and no extensions, and creates, as nodeClient, a
// PodCertificateRequest in the pod's namespace named "req-<random>", owned by
// the pod, for the pod bound to node. It returns the request as created and
// the private key. nodeClient should act as that node (Kube.NodeClient);
// spec.nodeName and spec.nodeUID come from node, so a test may pass a node
// other than the requester's to see it refused.
func RequestPodCertificate(ctx context.Context, nodeClient kubernetes.Interface, pod *corev1.Pod, node *corev1.Node, opts PodCertificateRequestOptions) (*certificatesv1.PodCertificateRequest, crypto.Signer, error) {
	if opts.SignerName == "" {
		return nil, nil, errors.New("pod certificate request needs a signer name")
	}
	keyType := opts.KeyType
	if keyType == "" {
		keyType = KeyTypeECDSAP256
	}
	key, stubCSR, err := generateKeyAndStubCSR(keyType)
	if err != nil {
		return nil, nil, err
	}
	lagTimeout := opts.LagTimeout
	if lagTimeout == 0 {
		lagTimeout = DefaultPodCertificateLagTimeout
	}
	saUID := opts.ServiceAccountUID
	if saUID == "" {
		var sa *corev1.ServiceAccount
		err := retryLag(ctx, lagTimeout, isAuthorizerLag, func() (err error) {
			sa, err = nodeClient.CoreV1().ServiceAccounts(pod.Namespace).Get(ctx, pod.Spec.ServiceAccountName, metav1.GetOptions{})
			return err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("get service account %s/%s as the node: %w", pod.Namespace, pod.Spec.ServiceAccountName, err)
		}
		saUID = sa.UID
	}
	req := &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:    pod.Namespace,
			GenerateName: kubeletRequestPrefix,
			// The kubelet sets neither controller nor blockOwnerDeletion.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}},
		},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName:                opts.SignerName,
			PodName:                   pod.Name,
			PodUID:                    pod.UID,
			ServiceAccountName:        pod.Spec.ServiceAccountName,
			ServiceAccountUID:         saUID,
			NodeName:                  types.NodeName(node.Name),
			NodeUID:                   node.UID,
			MaxExpirationSeconds:      opts.MaxExpirationSeconds,
			StubPKCS10Request:         stubCSR,
			UnverifiedUserAnnotations: opts.UnverifiedUserAnnotations,
		},
	}
	var created *certificatesv1.PodCertificateRequest
	err = retryLag(ctx, lagTimeout, isAdmissionLag, func() (err error) {
		created, err = nodeClient.CertificatesV1().PodCertificateRequests(pod.Namespace).Create(ctx, req, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("create pod certificate request for pod %s/%s as node %s: %w", pod.Namespace, pod.Name, node.Name, err)
	}
	return created, key, nil
}

// generateKeyAndStubCSR makes a key of keyType and the kubelet's stub
// PKCS#10 request: an empty template, so no subject and no extensions, signed
// by the key as proof of possession.
func generateKeyAndStubCSR(keyType string) (crypto.Signer, []byte, error) {
	var (
		key crypto.Signer
		err error
	)
	switch keyType {
	case KeyTypeRSA3072:
		key, err = rsa.GenerateKey(rand.Reader, 3072)
	case KeyTypeRSA4096:
		key, err = rsa.GenerateKey(rand.Reader, 4096)
	case KeyTypeECDSAP256:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case KeyTypeECDSAP384:
		key, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case KeyTypeECDSAP521:
		key, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case KeyTypeED25519:
		_, key, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, nil, fmt.Errorf("unknown key type %q", keyType)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("generate %s key: %w", keyType, err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		return nil, nil, fmt.Errorf("create stub PKCS#10 request: %w", err)
	}
	return key, csr, nil
}

// retryLag calls fn until it succeeds, fails with an error lag does not
// accept, or timeout passes; then it returns fn's last error. A negative
// timeout means one call.
func retryLag(ctx context.Context, timeout time.Duration, lag func(error) bool, fn func() error) error {
	last := fn()
	if last == nil || timeout < 0 || !lag(last) {
		return last
	}
	err := wait.PollUntilContextTimeout(ctx, readyPollInterval, timeout, false, func(context.Context) (bool, error) {
		last = fn()
		if last != nil && lag(last) {
			return false, nil
		}
		return true, last
	})
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return last
	}
	return err
}

// isAdmissionLag reports the errors NodeRestriction gives a pod certificate
// request when its informers may not have seen the node, the pod or the
// service account yet, or saw them with other UIDs: plain errors, which
// kube-apiserver answers with 500, where every refusal meant to stick is a
// 403.
func isAdmissionLag(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status) && status.Status().Code == http.StatusInternalServerError
}

// isAuthorizerLag reports the refusal the Node authorizer gives a node for a
// service account its graph does not link to the node yet, and a not found
// for one the node's get raced with.
func isAuthorizerLag(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsNotFound(err)
}

// WaitPodCertificateIssued waits until the request is issued (its status has
// a certificate chain) or denied or failed, and returns it: the caller tells
// which from its conditions, e.g. with PodCertificateRequestOutcome.
func WaitPodCertificateIssued(ctx context.Context, client kubernetes.Interface, namespace, name string) (*certificatesv1.PodCertificateRequest, error) {
	var (
		pcr  *certificatesv1.PodCertificateRequest
		last error
	)
	err := wait.PollUntilContextTimeout(ctx, readyPollInterval, podCertificateTimeout, true, func(ctx context.Context) (bool, error) {
		pcr, last = client.CertificatesV1().PodCertificateRequests(namespace).Get(ctx, name, metav1.GetOptions{})
		if last != nil {
			return false, nil
		}
		return PodCertificateRequestOutcome(pcr) != "", nil
	})
	if err != nil {
		return nil, fmt.Errorf("wait for pod certificate request %s/%s to be issued, denied or failed (last error: %v): %w", namespace, name, last, err)
	}
	return pcr, nil
}

// PodCertificateRequestOutcome returns "Issued" if the request's status has a
// certificate chain, "Denied" or "Failed" if it has that condition with
// status True, and "" while it is pending.
func PodCertificateRequestOutcome(pcr *certificatesv1.PodCertificateRequest) string {
	if pcr.Status.CertificateChain != "" {
		return certificatesv1.PodCertificateRequestConditionTypeIssued
	}
	for _, t := range []string{certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed} {
		if meta.IsStatusConditionTrue(pcr.Status.Conditions, t) {
			return t
		}
	}
	return ""
}
