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
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/render"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/testing/memtest"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// promptRefusal bounds how long an attack may delay a refusal: less than the 5 s after which
// a stalled client is dropped, so that a configuration whose timeoutSeconds is shorter than
// the API server's default (10 s, which the chart keeps) does not fail open either.
const promptRefusal = 3 * time.Second

// starvationPeakBound bounds the process's peak memory growth under any starvation shape: the
// webhook's body budget (about 50 MiB) and the decoding of reviews, the attackers' own
// connections (they run in this process) and the API server's clients.
const starvationPeakBound = 256 << 20

// TestAdmissionNeverFailsOpen registers the webhook with a real kube-apiserver as the chart
// first does, failurePolicy Ignore, so that any call the API server cannot complete in time
// admits the object. For each starvation shape a fresh webhook is started (so that the API
// server must connect anew) and attacked from eight loopback addresses other than the API
// server's, every attacker reconnecting as soon as it is dropped. Then a ClusterSPIFFEID
// outside the trust domain, created through the API server, must be refused with the
// webhook's reason within promptRefusal, and a valid one admitted by the webhook itself, not
// by the policy; the process's peak memory may grow by at most starvationPeakBound.
func TestAdmissionNeverFailsOpen(t *testing.T) {
	if testing.Short() {
		t.Skip("needs real kube-apiserver and spire-server; skipped with -short")
	}
	stack := realcluster.NewStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	client, err := spire.Dial(ctx, stack.SPIRE.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	authorities, err := client.Authority().X509Authorities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	for _, a := range authorities {
		roots.AddCert(a)
	}

	td := stack.SPIRE.TrustDomain()
	var admittedByWebhook sync.Map
	validators := Validators{
		ClusterSPIFFEID: func(o *spirev1alpha1.ClusterSPIFFEID) field.ErrorList {
			errs := render.ValidateClusterSPIFFEID(o, td)
			if len(errs) == 0 {
				admittedByWebhook.Store(o.Name, true)
			}
			return errs
		},
		ClusterFederatedTrustDomain: func(*spirev1alpha1.ClusterFederatedTrustDomain) field.ErrorList { return nil },
	}
	port := freePort(t)
	registerWebhooks(t, ctx, stack, port, admissionregistrationv1.Ignore)
	clusterSPIFFEIDs := stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs()
	create := func(name, template string) error {
		_, err := clusterSPIFFEIDs.Create(ctx, &spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: template}}, metav1.CreateOptions{})
		return err
	}
	const refusal = "outside trust domain"
	invalidTemplate := "spiffe://elsewhere.example/ns/{{ .PodMeta.Namespace }}"
	validTemplate := "spiffe://" + td + "/ns/{{ .PodMeta.Namespace }}"

	// The API server calls the webhook once it trusts the caBundle the webhook writes; with
	// Ignore, only a refusal shows that it does.
	hook, stop := startWebhookOn(t, ctx, stack, client, port, validators)
	attempt := 0
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		attempt++
		name := fmt.Sprintf("warm-up-%d", attempt)
		err := create(name, invalidTemplate)
		if err == nil {
			_ = clusterSPIFFEIDs.Delete(ctx, name, metav1.DeleteOptions{})
		}
		return err != nil && strings.Contains(err.Error(), refusal), nil
	})
	stop()
	if err != nil || !hook.Ready() {
		t.Fatalf("the API server never called the webhook: %v", err)
	}

	target := fmt.Sprintf("127.0.0.1:%d", port)
	for _, shape := range starvationShapes(target, roots) {
		t.Run(shape.name, func(t *testing.T) {
			hook, stop := startWebhookOn(t, ctx, stack, client, port, validators)
			defer stop()
			if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				return hook.Ready(), nil
			}); err != nil {
				t.Fatal("the webhook never became ready")
			}
			memtest.ResetPeak(t)
			before := memtest.Status(t, "VmHWM")

			attackCtx, stopAttack := context.WithCancel(ctx)
			var attackers sync.WaitGroup
			defer func() {
				stopAttack()
				attackers.Wait()
			}()
			var holding, held atomic.Int64
			counting := &attackCounter{holding: &holding, held: &held}
			for i := range shape.attackers {
				local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%8))}
				attackers.Go(func() {
					for attackCtx.Err() == nil {
						shape.attack(attackCtx, local, counting)
					}
				})
			}
			if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				return held.Load() >= shape.established, nil
			}); err != nil {
				t.Fatalf("the attack never got going: %d of %d connections or streams held", held.Load(), shape.established)
			}

			name := "invalid-" + shape.name
			start := time.Now()
			err := create(name, invalidTemplate)
			waited := time.Since(start)
			if err == nil {
				_ = clusterSPIFFEIDs.Delete(ctx, name, metav1.DeleteOptions{})
				t.Errorf("%s: an invalid ClusterSPIFFEID was admitted after %v: the API server's call failed and failurePolicy Ignore let it in",
					shape.name, waited.Round(time.Millisecond))
			} else if !strings.Contains(err.Error(), refusal) {
				t.Errorf("%s: an invalid ClusterSPIFFEID was refused after %v, but not by the webhook: %v", shape.name, waited.Round(time.Millisecond), err)
			} else if waited > promptRefusal {
				t.Errorf("%s: an invalid ClusterSPIFFEID was refused only after %v, over %v: a shorter timeoutSeconds would have admitted it",
					shape.name, waited.Round(time.Millisecond), promptRefusal)
			}

			name = "valid-" + shape.name
			start = time.Now()
			err = create(name, validTemplate)
			validWaited := time.Since(start)
			_, seen := admittedByWebhook.Load(name)
			switch {
			case err != nil:
				t.Errorf("%s: a valid ClusterSPIFFEID was refused after %v: %v", shape.name, validWaited.Round(time.Millisecond), err)
			case !seen:
				t.Errorf("%s: a valid ClusterSPIFFEID was admitted after %v without the webhook's verdict", shape.name, validWaited.Round(time.Millisecond))
			}
			if err == nil {
				_ = clusterSPIFFEIDs.Delete(ctx, name, metav1.DeleteOptions{})
			}
			grown := memtest.Status(t, "VmHWM") - before
			t.Logf("%s (%d attackers, %d holding, %d held in all): invalid answered after %v, valid after %v; peak RSS grew by %d MiB",
				shape.name, shape.attackers, holding.Load(), held.Load(), waited.Round(time.Millisecond), validWaited.Round(time.Millisecond), grown>>20)
			if grown > starvationPeakBound {
				t.Errorf("%s: peak RSS grew by %d MiB, over the bound of %d MiB", shape.name, grown>>20, starvationPeakBound>>20)
			}
		})
	}
}

// starvationShape is one way of starving the webhook: attack holds one connection (or a few
// streams) the way the shape does until the server drops it or ctx ends, counting it while it
// does; attackers run it in a loop.
type starvationShape struct {
	name        string
	attackers   int
	established int64 // connections or streams held, in all, from which the attack is on
	attack      func(ctx context.Context, local *net.TCPAddr, holding *attackCounter)
}

// attackCounter counts the connections or streams attackers hold now, and have held in all.
type attackCounter struct{ holding, held *atomic.Int64 }

// hold counts one from now until the returned function is called.
func (c *attackCounter) hold() (release func()) {
	c.holding.Add(1)
	c.held.Add(1)
	return func() { c.holding.Add(-1) }
}

func starvationShapes(target string, roots *x509.CertPool) []starvationShape {
	review := starvationReview()
	dialTLS := func(ctx context.Context, local *net.TCPAddr) *tls.Conn {
		dialer := &tls.Dialer{NetDialer: &net.Dialer{LocalAddr: local, Timeout: 5 * time.Second},
			Config: &tls.Config{RootCAs: roots, ServerName: "localhost", NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12}}
		conn, err := dialer.DialContext(ctx, "tcp", target)
		if err != nil {
			return nil
		}
		return conn.(*tls.Conn)
	}
	// hold counts the connection as holding until the server closes it or ctx ends.
	hold := func(ctx context.Context, conn net.Conn, holding *attackCounter) {
		defer holding.hold()()
		stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
		defer stop()
		_, _ = io.Copy(io.Discard, conn)
	}
	head := func(length int) string {
		return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
			ClusterSPIFFEIDPath, length)
	}
	// trickle writes data a byte a second until it is written, the server closes the
	// connection, or ctx ends.
	trickle := func(ctx context.Context, conn net.Conn, data []byte) {
		for _, b := range data {
			if _, err := conn.Write([]byte{b}); err != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
	return []starvationShape{
		{
			// Headers and half a body, then nothing; re-sent as soon as the server drops it.
			name: "stalled-bodies", attackers: 64, established: 64,
			attack: func(ctx context.Context, local *net.TCPAddr, holding *attackCounter) {
				conn := dialTLS(ctx, local)
				if conn == nil {
					return
				}
				defer conn.Close()
				if _, err := io.WriteString(conn, head(len(review))+string(review[:len(review)/2])); err != nil {
					return
				}
				hold(ctx, conn, holding)
			},
		},
		{
			// A review answered, then the connection kept open and idle.
			name: "idle-keep-alives", attackers: 320, established: 256,
			attack: func(ctx context.Context, local *net.TCPAddr, holding *attackCounter) {
				conn := dialTLS(ctx, local)
				if conn == nil {
					return
				}
				defer conn.Close()
				if _, err := io.WriteString(conn, head(len(review))+string(review)); err != nil {
					return
				}
				r := bufio.NewReader(conn)
				resp, err := http.ReadResponse(r, nil)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
				defer stop()
				defer holding.hold()()
				_, _ = r.ReadByte() // until the server closes it
			},
		},
		{
			// A request's headers, a byte a second.
			name: "headers-a-byte-a-second", attackers: 320, established: 256,
			attack: func(ctx context.Context, local *net.TCPAddr, holding *attackCounter) {
				conn := dialTLS(ctx, local)
				if conn == nil {
					return
				}
				defer conn.Close()
				go trickle(ctx, conn, []byte(head(len(review))))
				hold(ctx, conn, holding)
			},
		},
		{
			// A TLS handshake record, a byte a second.
			name: "slow-tls-handshakes", attackers: 320, established: 256,
			attack: func(ctx context.Context, local *net.TCPAddr, holding *attackCounter) {
				dialer := &net.Dialer{LocalAddr: local, Timeout: 5 * time.Second}
				conn, err := dialer.DialContext(ctx, "tcp", target)
				if err != nil {
					return
				}
				defer conn.Close()
				go trickle(ctx, conn, append([]byte{0x16, 0x03, 0x01, 0x02, 0x00}, make([]byte, 512)...))
				hold(ctx, conn, holding)
			},
		},
		{
			// A body of the largest size, sent over four seconds but for its last bytes.
			name: "max-size-body-slowly", attackers: 24, established: 24,
			attack: func(ctx context.Context, local *net.TCPAddr, holding *attackCounter) {
				conn := dialTLS(ctx, local)
				if conn == nil {
					return
				}
				defer conn.Close()
				if _, err := io.WriteString(conn, head(maxReviewBytes)); err != nil {
					return
				}
				closed := make(chan struct{})
				go func() {
					defer close(closed)
					_, _ = io.Copy(io.Discard, conn)
				}()
				stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
				defer stop()
				// Counted from three quarters of the body on, when it holds the most.
				release := func() {}
				defer func() { release() }()
				piece := []byte(strings.Repeat(" ", 64<<10))
				pieces := (maxReviewBytes - 1) / len(piece)
				tick := time.NewTicker(4 * time.Second / time.Duration(pieces))
				defer tick.Stop()
				for i := range pieces {
					if _, err := conn.Write(piece); err != nil {
						return
					}
					if i == 3*pieces/4 {
						release = holding.hold()
					}
					select {
					case <-closed:
						return
					case <-tick.C:
					}
				}
				<-closed
			},
		},
		{
			// HTTP/2: one connection per address, each with many streams that send half a
			// review and stall, re-sent as soon as one ends.
			name: "http2-streams", attackers: 8, established: 8 * 16,
			attack: func(ctx context.Context, local *net.TCPAddr, holding *attackCounter) {
				transport := &http.Transport{
					DialContext:       (&net.Dialer{LocalAddr: local, Timeout: 5 * time.Second}).DialContext,
					TLSClientConfig:   &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12},
					ForceAttemptHTTP2: true,
				}
				defer transport.CloseIdleConnections()
				var streams sync.WaitGroup
				for range 32 {
					streams.Go(func() {
						for ctx.Err() == nil {
							body, w := io.Pipe()
							req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+target+ClusterSPIFFEIDPath, body)
							if err != nil {
								return
							}
							req.Host = "localhost"
							req.ContentLength = int64(len(review))
							ended := make(chan struct{})
							go func() {
								if _, err := w.Write(review[:len(review)/2]); err != nil {
									return
								}
								defer holding.hold()()
								select {
								case <-ctx.Done():
								case <-ended:
								}
							}()
							if resp, err := transport.RoundTrip(req); err == nil {
								_, _ = io.Copy(io.Discard, resp.Body)
								_ = resp.Body.Close()
							}
							close(ended)
							_ = w.CloseWithError(io.ErrUnexpectedEOF)
						}
					})
				}
				streams.Wait()
			},
		},
	}
}

// starvationReview is a review of a valid ClusterSPIFFEID named "attacker".
func starvationReview() []byte {
	return []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"attacker",` +
		`"kind":{"group":"spire.spiffe.io","version":"v1alpha1","kind":"ClusterSPIFFEID"},"name":"attacker","operation":"CREATE",` +
		`"object":{"apiVersion":"spire.spiffe.io/v1alpha1","kind":"ClusterSPIFFEID","metadata":{"name":"attacker"},` +
		`"spec":{"spiffeIDTemplate":"spiffe://example.org/attacker"}}}}`)
}
