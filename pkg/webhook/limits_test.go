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

package webhook

import (
	"bufio"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// TestWebhookDisconnectsAStalledBody: a client that sends a review's headers and half its
// body, then nothing, is disconnected once the read timeout has passed, with the webhook's
// own limits; without a read timeout nothing would end such a connection.
func TestWebhookDisconnectsAStalledBody(t *testing.T) {
	hook := startHook(t, defaultLimits())
	timeout := defaultLimits().ReadTimeout
	body := validReview(t, 0)

	conn := hook.dial(t)
	sendHead(t, conn, ClusterSPIFFEIDPath, len(body), "")
	start := time.Now()
	if _, err := conn.Write(body[:len(body)/2]); err != nil {
		t.Fatal(err)
	}
	status, err := readUntilClosed(conn, start.Add(2*timeout))
	lived := time.Since(start)
	t.Logf("a connection stalled mid-body lived %v (read timeout %v); answer %d", lived.Round(time.Millisecond), timeout, status)
	if err != nil {
		t.Fatalf("the stalled connection was still open after %v: %v", lived.Round(time.Millisecond), err)
	}
	if lived < timeout/2 {
		t.Errorf("disconnected after %v, before the read timeout %v: a slow client would be cut off", lived, timeout)
	}
	if status != http.StatusRequestTimeout {
		t.Errorf("answer %d, want 408", status)
	}
}

// TestWebhookRefusesAnOversizedReview: a body over the cap is answered 413, whether its
// length is declared (nothing of it is read: the client sends none) or found while reading a
// chunked one; a review just under the cap is still validated.
func TestWebhookRefusesAnOversizedReview(t *testing.T) {
	hook := startHook(t, defaultLimits())

	t.Run("declared length", func(t *testing.T) {
		conn := hook.dial(t)
		sendHead(t, conn, ClusterSPIFFEIDPath, maxReviewBytes+1, "")
		status, err := readUntilClosed(conn, time.Now().Add(10*time.Second))
		if err != nil {
			t.Fatalf("no answer without the body: %v", err)
		}
		if status != http.StatusRequestEntityTooLarge {
			t.Errorf("answer %d, want 413", status)
		}
	})

	t.Run("chunked", func(t *testing.T) {
		conn := hook.dial(t)
		if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n", ClusterSPIFFEIDPath); err != nil {
			t.Fatal(err)
		}
		// Send up to twice the cap; the server stops reading at the cap, so writing may fail.
		go func() {
			chunk := strings.Repeat(" ", 64<<10)
			for sent := 0; sent < 2*maxReviewBytes; sent += len(chunk) {
				if _, err := fmt.Fprintf(conn, "%x\r\n%s\r\n", len(chunk), chunk); err != nil {
					return
				}
			}
		}()
		status, err := readUntilClosed(conn, time.Now().Add(10*time.Second))
		if err != nil {
			t.Fatalf("no answer to an endless body: %v", err)
		}
		if status != http.StatusRequestEntityTooLarge {
			t.Errorf("answer %d, want 413", status)
		}
	})

	t.Run("just under the cap", func(t *testing.T) {
		body := validReview(t, maxReviewBytes-4<<10)
		if len(body) > maxReviewBytes {
			t.Fatalf("review of %d bytes is over the cap", len(body))
		}
		resp, err := hook.client.Post(hook.url+ClusterSPIFFEIDPath, "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if got := decodeAllowed(t, resp); !got {
			t.Error("a valid review of a large object was not allowed")
		}
	})
}

// TestWebhookStalledClientsHoldNoSlot: clients stalled mid-body hold the bytes they have sent
// and no review slot, so with many more of them than slots a review is answered at once,
// without a 429; each stalled client is disconnected with 408 after the read timeout, and the
// server's goroutines stay bounded by its connections.
func TestWebhookStalledClientsHoldNoSlot(t *testing.T) {
	limits := defaultLimits()
	limits.ReadTimeout, limits.WriteTimeout, limits.reviewSlots = 3*time.Second, 6*time.Second, 4
	hook := startHook(t, limits)
	const stalled = 48 // within one address's share of connections, with the client's
	body := validReview(t, 0)

	before := runtime.NumGoroutine()
	type outcome struct {
		status int
		err    error
	}
	outcomes := make(chan outcome, stalled)
	deadline := time.Now().Add(4 * limits.ReadTimeout)
	for range stalled {
		conn := hook.dial(t)
		sendHead(t, conn, ClusterSPIFFEIDPath, len(body), "")
		if _, err := conn.Write(body[:len(body)/2]); err != nil {
			t.Fatal(err)
		}
		go func() {
			status, err := readUntilClosed(conn, deadline)
			outcomes <- outcome{status, err}
		}()
	}
	// Each stalled client costs a server goroutine and this test's reader once accepted.
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return runtime.NumGoroutine()-before >= 2*stalled, nil
	}); err != nil {
		t.Fatalf("the stalled clients were not all accepted: goroutines grew by %d", runtime.NumGoroutine()-before)
	}

	start := time.Now()
	resp, err := hook.client.Post(hook.url+ClusterSPIFFEIDPath, "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("with %d clients stalled mid-body, a review was answered %d, want 200 at once: they hold review slots", stalled, resp.StatusCode)
	}
	if !decodeAllowed(t, resp) {
		t.Error("a valid review was not allowed")
	}
	t.Logf("a valid review was answered after %v while %d clients stalled mid-body (%d slots)",
		time.Since(start).Round(time.Millisecond), stalled, limits.reviewSlots)

	for range stalled {
		o := <-outcomes
		if o.err != nil {
			t.Fatalf("a stalled client was never disconnected: %v", o.err)
		}
		if o.status != http.StatusRequestTimeout {
			t.Errorf("a stalled client was answered %d, want 408", o.status)
		}
	}
}

// TestWebhookBoundsConnections: of connections that never even start a TLS handshake, at most
// MaxConns are open at once (each newcomer displaces the longest waiting) instead of each
// costing a goroutine; while they are still open, a review is answered.
func TestWebhookBoundsConnections(t *testing.T) {
	limits := defaultLimits()
	limits.MaxConns, limits.MaxConnsPerAddress = 8, 8
	hook := startHook(t, limits)
	const idle = 64

	before := runtime.NumGoroutine()
	conns := make([]net.Conn, 0, idle)
	for range idle {
		conn, err := net.Dial("tcp", hook.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
	}
	// A server without the cap takes every connection within milliseconds; give it a second
	// to show it does (the goroutine count is the only view into its accept loop).
	var grown int
	_ = wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, time.Second, true, func(context.Context) (bool, error) {
		grown = runtime.NumGoroutine() - before
		return grown >= idle, nil
	})
	t.Logf("%d idle connections: goroutines grew by %d (maxConns %d)", idle, grown, limits.MaxConns)
	if bound := limits.MaxConns + 4; grown > bound {
		t.Errorf("goroutines grew by %d with %d idle connections, want at most %d", grown, idle, bound)
	}
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	resp, err := hook.client.Post(hook.url+ClusterSPIFFEIDPath, "application/json", strings.NewReader(string(validReview(t, 0))))
	if err != nil {
		t.Fatalf("with %d connections waiting for a handshake, a review was not answered: %v", idle, err)
	}
	defer resp.Body.Close()
	if !decodeAllowed(t, resp) {
		t.Error("a valid review was not allowed")
	}
}

// TestWebhookRefusesHugeHeaders: headers past maxHeaderBytes are answered 431, where Go's
// default allows 1 MiB on every connection.
func TestWebhookRefusesHugeHeaders(t *testing.T) {
	hook := startHook(t, defaultLimits())
	body := validReview(t, 0)
	conn := hook.dial(t)
	sendHead(t, conn, ClusterSPIFFEIDPath, len(body), "X-Padding: "+strings.Repeat("a", 256<<10)+"\r\n")
	go func() { _, _ = conn.Write(body) }()
	status, err := readUntilClosed(conn, time.Now().Add(10*time.Second))
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	if status != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("answer %d to 256 KiB of headers, want 431", status)
	}
}

// testHook is a webhook serving on loopback with a certificate from an in-process CA.
type testHook struct {
	addr, url string
	caPEM     []byte
	roots     *x509.CertPool
	client    *http.Client
}

// startHook serves a webhook with limits until the test ends. The serving certificate
// comes from an in-process CA: these tests are about the server's sockets, not SPIRE
// (TestWebhookThroughTheAPIServer mints from a real one).
func startHook(t *testing.T, limits serverLimits) *testHook {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	minter := newTestMinter(t)
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := listener.Addr().(*net.TCPAddr).Port
	base := fmt.Sprintf("https://localhost:%d", port)
	config := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "spire-webhook"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "vclusterspiffeid.kb.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: new(base + ClusterSPIFFEIDPath)}}},
	}
	hook, err := New(Options{
		ConfigurationName: config.Name,
		Host:              "127.0.0.1",
		Port:              port,
		ID:                &url.URL{Scheme: "spiffe", Host: "example.org", Path: "/spire-controller-manager-webhook"},
		Minter:            minter,
		KubeClient:        fake.NewClientset(config),
		Validators: Validators{
			ClusterSPIFFEID:             func(*spirev1alpha1.ClusterSPIFFEID) field.ErrorList { return nil },
			ClusterFederatedTrustDomain: func(*spirev1alpha1.ClusterFederatedTrustDomain) field.ErrorList { return nil },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	hook.limits = limits
	done := make(chan struct{})
	go func() {
		defer close(done)
		hook.Serve(ctx, listener)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return hook.Ready(), nil
	}); err != nil {
		t.Fatalf("the webhook never became ready: %v", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(minter.ca)
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
	t.Cleanup(transport.CloseIdleConnections)
	return &testHook{
		addr:   listener.Addr().String(),
		url:    base,
		caPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: minter.ca.Raw}),
		roots:  roots,
		client: &http.Client{Transport: transport, Timeout: 30 * time.Second},
	}
}

// dial opens a TLS connection speaking HTTP/1.1, closed when the test ends.
func (h *testHook) dial(t *testing.T) *tls.Conn {
	t.Helper()
	conn, err := tls.Dial("tcp", h.addr, &tls.Config{RootCAs: h.roots, ServerName: "localhost",
		NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// sendHead writes a POST's request line and headers, with extra header lines.
func sendHead(t *testing.T, conn net.Conn, path string, contentLength int, extra string) {
	t.Helper()
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n",
		path, contentLength, extra); err != nil {
		t.Fatal(err)
	}
}

// readUntilClosed reads the connection until the server closes it, or fails at deadline.
// It returns the status of the answer, if one came before the close.
func readUntilClosed(conn net.Conn, deadline time.Time) (int, error) {
	if err := conn.SetReadDeadline(deadline); err != nil {
		return 0, err
	}
	r := bufio.NewReader(conn)
	status := 0
	if resp, err := http.ReadResponse(r, nil); err == nil {
		status = resp.StatusCode
	} else if errors.Is(err, os.ErrDeadlineExceeded) {
		return 0, err
	}
	if _, err := io.Copy(io.Discard, r); errors.Is(err, os.ErrDeadlineExceeded) {
		return status, fmt.Errorf("answered %d but not closed: %w", status, err)
	}
	return status, nil
}

// validReview is an AdmissionReview creating a ClusterSPIFFEID, padded by an annotation to
// about pad bytes.
func validReview(t *testing.T, pad int) []byte {
	t.Helper()
	obj := &spirev1alpha1.ClusterSPIFFEID{
		TypeMeta:   metav1.TypeMeta{APIVersion: "spire.spiffe.io/v1alpha1", Kind: "ClusterSPIFFEID"},
		ObjectMeta: metav1.ObjectMeta{Name: "x", Annotations: map[string]string{"pad": strings.Repeat("p", pad)}},
		Spec:       spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://example.org/x"},
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	review, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "uid-1", Name: "x", Operation: admissionv1.Create,
			Kind:   metav1.GroupVersionKind{Group: "spire.spiffe.io", Version: "v1alpha1", Kind: "ClusterSPIFFEID"},
			Object: k8sruntime.RawExtension{Raw: raw}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return review
}

func decodeAllowed(t *testing.T, resp *http.Response) bool {
	t.Helper()
	review := &admissionv1.AdmissionReview{}
	if err := json.NewDecoder(resp.Body).Decode(review); err != nil || review.Response == nil {
		t.Fatalf("status %d: not an AdmissionReview answer: %v", resp.StatusCode, err)
	}
	return review.Response.Allowed
}

// testMinter signs serving certificates with an in-process CA.
type testMinter struct {
	ca  *x509.Certificate
	key *ecdsa.PrivateKey
}

func newTestMinter(t *testing.T) *testMinter {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}, &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}}, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testMinter{ca: ca, key: key}
}

func (m *testMinter) X509Authorities(context.Context) ([]*x509.Certificate, error) {
	return []*x509.Certificate{m.ca}, nil
}

func (m *testMinter) MintX509SVID(_ context.Context, key crypto.Signer, id *url.URL, dnsNames []string, ttl time.Duration) (*spire.X509SVID, error) {
	now := time.Now()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), NotBefore: now.Add(-time.Minute), NotAfter: now.Add(ttl),
		URIs: []*url.URL{id}, DNSNames: dnsNames,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, m.ca, key.Public(), m.key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &spire.X509SVID{Chain: []*x509.Certificate{leaf}, ExpiresAt: leaf.NotAfter}, nil
}
