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

// Package serving builds the process's HTTP servers (the admission webhook, health probes and
// metrics) with one set of bounds on what a client may cost: time to send a request, header
// bytes, connections in total and per client address, HTTP/2 streams and buffers, and, for
// handlers that read bodies, a byte budget shared by every connection.
package serving

import (
	"context"
	"crypto/tls"
	"errors"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// Limits are what the clients of one server may cost it. Every field is set.
type Limits struct {
	// ReadTimeout bounds a TLS handshake and reading a request, headers and body.
	ReadTimeout time.Duration
	// WriteTimeout runs from the end of a request's headers to the end of its answer.
	WriteTimeout time.Duration
	// IdleTimeout ends a keep-alive connection between requests.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers (Go's default is 1 MiB).
	MaxHeaderBytes int
	// MaxConns bounds open connections, each a goroutine and TLS buffers. At the cap a new
	// connection closes one of the address that holds the most: the longest idle, else the
	// one that has waited longest for its handshake or request; only if all are busy
	// answering is it closed itself.
	MaxConns int
	// MaxConnsPerAddress is one client address's share of MaxConns: beyond it, a new
	// connection from that address displaces another of its own, never someone else's.
	MaxConnsPerAddress int
	// MaxStreams bounds the concurrent HTTP/2 streams of one connection, each a goroutine.
	MaxStreams int
	// StreamBuffer is the HTTP/2 receive window of a connection and of a stream: how much
	// of bodies not yet read the server buffers per connection.
	StreamBuffer int
}

// shutdownGrace is how long answers in progress may finish once the context is done.
const shutdownGrace = 5 * time.Second

// Serve serves handler on listener under limits, over TLS if tlsConfig is not nil, until ctx
// is done; then it shuts down, letting answers in progress finish for a few seconds. It
// returns when the server has stopped, with an error only if serving failed.
func Serve(ctx context.Context, listener net.Listener, handler http.Handler, tlsConfig *tls.Config, limits Limits) error {
	tracker := newConnTracker(limits.MaxConns, limits.MaxConnsPerAddress)
	server := &http.Server{
		Handler:           handler,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: limits.ReadTimeout,
		ReadTimeout:       limits.ReadTimeout,
		WriteTimeout:      limits.WriteTimeout,
		IdleTimeout:       limits.IdleTimeout,
		MaxHeaderBytes:    limits.MaxHeaderBytes,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:          limits.MaxStreams,
			MaxReceiveBufferPerConnection: limits.StreamBuffer,
			MaxReceiveBufferPerStream:     limits.StreamBuffer,
		},
		ConnState: tracker.setState,
		ConnContext: func(ctx context.Context, conn net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, unwrap(conn))
		},
		BaseContext: func(net.Listener) context.Context { return ctx },
		ErrorLog:    log.New(serverLog{klog.FromContext(ctx)}, "", 0),
	}
	served, shutDown := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(shutDown)
		select {
		case <-ctx.Done():
		case <-served:
			return
		}
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancel()
		_ = server.Shutdown(shutdownCtx)
	}()
	listener = &trackingListener{Listener: listener, tracker: tracker}
	var err error
	if tlsConfig != nil {
		err = server.ServeTLS(listener, "", "")
	} else {
		err = server.Serve(listener)
	}
	close(served)
	<-shutDown // Serve returns as Shutdown begins; the answers in progress end with it.
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// serverLog takes net/http's own messages. Failed handshakes are what closing a displaced or
// timed-out connection looks like, so they are logged only at V(4).
type serverLog struct{ logger klog.Logger }

func (l serverLog) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if strings.HasPrefix(msg, "http: TLS handshake error") {
		l.logger.V(4).Info(msg)
	} else {
		l.logger.Info(msg)
	}
	return len(p), nil
}
