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
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// maxReviewBytes bounds an AdmissionReview body. etcd stores objects of at most 1.5 MiB and a
// review carries at most the object and its old version, so 3 MiB (also the API server's own
// limit on a request body) plus 64 KiB for the review around them holds every review of an
// object that can be stored. A larger body is refused with 413 before it is read.
const maxReviewBytes = 3<<20 + 64<<10

// serverLimits are what one client may cost the webhook's server: time, bytes and a share of
// its concurrency. Every field is set; tests shorten them.
type serverLimits struct {
	// readTimeout bounds reading a request, headers and body, and a TLS handshake. The API
	// server writes a review in one go right after its headers, so on any cluster network
	// it arrives in well under a second. Half the API server's default webhook timeout (10 s)
	// leaves the other half to a call it retries after a 429.
	readTimeout time.Duration
	// writeTimeout runs from the end of a request's headers to the end of its answer: the
	// body, the validation (milliseconds) and the write. The API server's default webhook
	// timeout is 10 s; an answer later than that is one it no longer waits for.
	writeTimeout time.Duration
	// idleTimeout ends a keep-alive connection between requests. It is longer than the API
	// server's own idle timeout (Go's default transport: 90 s), so that the client, not we,
	// ends an idle connection and never sends a review onto one we are closing.
	idleTimeout time.Duration
	// maxHeaderBytes bounds a request's headers. The API server sends a handful of short
	// ones (a bearer token from an admission kubeconfig is a few KiB); Go's default is 1 MiB
	// per connection.
	maxHeaderBytes int
	// maxInFlight bounds the requests being read or validated at once, and so the memory of
	// their bodies (16 × maxReviewBytes ≈ 49 MiB). Validation takes milliseconds, so 16 serve
	// bursts from several API servers; beyond it a request is answered 429 with Retry-After
	// at once, which the API server's client waits for and retries within its timeout. A
	// client stalled in a slot loses it after readTimeout.
	maxInFlight int
	// maxConns bounds open connections, each a goroutine and TLS buffers, including those
	// that never get to a request (a slow handshake, idle keep-alives). The API server keeps a
	// few idle connections per host; further connections wait in the kernel's accept queue.
	// A client that holds them all delays the others (by readTimeout, or idleTimeout if it
	// idles): the webhook shares its process with the controllers, whose memory comes first.
	maxConns int
}

// defaultLimits are the limits the webhook serves with.
func defaultLimits() serverLimits {
	return serverLimits{
		readTimeout:    5 * time.Second,
		writeTimeout:   10 * time.Second,
		idleTimeout:    120 * time.Second,
		maxHeaderBytes: 32 << 10,
		maxInFlight:    16,
		maxConns:       256,
	}
}

const (
	// retryAfterSeconds is the Retry-After of a 429: the API server's client waits this long
	// before it calls again, well within its default 10 s timeout.
	retryAfterSeconds = "1"
	// refusedReadTimeout bounds reading (and dropping) the body of a request refused with
	// 429: a client that has sent its body gets the answer rather than a reset, and one that
	// stalls is disconnected.
	refusedReadTimeout = time.Second
)

// newServer returns the HTTPS server for handler under limits; serve it on limitListener's.
func newServer(ctx context.Context, handler http.Handler, tlsConfig *tls.Config, limits serverLimits) *http.Server {
	return &http.Server{
		Handler:           limitInFlight(handler, limits.maxInFlight),
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: limits.readTimeout,
		ReadTimeout:       limits.readTimeout,
		WriteTimeout:      limits.writeTimeout,
		IdleTimeout:       limits.idleTimeout,
		MaxHeaderBytes:    limits.maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
}

// limitListener caps the connections accepted from listener at limits.maxConns.
func limitListener(listener net.Listener, limits serverLimits) net.Listener {
	return netutil.LimitListener(listener, limits.maxConns)
}

// limitInFlight serves at most n requests at once and answers the others 429 at once, then
// closes their connections.
func limitInFlight(next http.Handler, n int) http.Handler {
	slots := make(chan struct{}, n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			next.ServeHTTP(w, r)
		default:
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(refusedReadTimeout))
			w.Header().Set("Retry-After", retryAfterSeconds)
			if r.ProtoMajor == 1 { // on HTTP/2 it would end every stream of the connection
				w.Header().Set("Connection", "close")
			}
			http.Error(w, "too many admission reviews at once", http.StatusTooManyRequests)
		}
	})
}
