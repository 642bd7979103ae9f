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

package app

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// svidWaitTimeout bounds how long DialSPIRE waits for spire-registrar's first X509-SVID from
// the SPIRE agent's Workload API. The agent answers at once when an entry already selects the
// process; one that is being created reaches the agent within its sync interval (5 s by
// default). Past this, start-up fails and the pod, never ready, is restarted.
var svidWaitTimeout = 2 * time.Minute

// DialSPIRE returns a client for the SPIRE server the config names, with the config's gRPC
// settings (grpc.maxCallRecvMsgSize): over the local admin socket, or, with
// spireServerAddress, over TCP with SPIFFE mTLS. The caller closes it.
//
// Over TCP spire-registrar presents its own X509-SVID, fetched from the SPIRE agent's
// Workload API, and accepts only a server presenting the configured SPIFFE ID. The SVID and
// bundle come from a go-spiffe X509Source that follows the agent's rotations, so a renewed
// SVID is used from the next handshake on without a restart; closing the client closes the
// source. DialSPIRE returns only once the source holds an SVID (at most svidWaitTimeout), so
// a controller without an identity is never started, hence never ready.
func DialSPIRE(ctx context.Context, cfg *config.Config) (*spire.Client, error) {
	var opts []grpc.DialOption
	if cfg.GRPCMaxCallRecvMsgSize > 0 {
		// Appended after the client's defaults, so this limit wins.
		opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(cfg.GRPCMaxCallRecvMsgSize)))
	}
	if cfg.SPIREServerAddress != "" {
		return dialSPIREOverMTLS(ctx, cfg, opts)
	}
	client, err := spire.Dial(ctx, cfg.SPIREServerSocketPath, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to SPIRE server at %s: %w", cfg.SPIREServerSocketPath, err)
	}
	return client, nil
}

// dialSPIREOverMTLS dials cfg.SPIREServerAddress with an X509Source from the agent at
// cfg.WorkloadAPIAddress.
func dialSPIREOverMTLS(ctx context.Context, cfg *config.Config, opts []grpc.DialOption) (*spire.Client, error) {
	logger := klog.FromContext(ctx)
	start := time.Now()
	source, err := NewX509Source(ctx, cfg.WorkloadAPIAddress, svidWaitTimeout)
	if err != nil {
		return nil, err
	}
	svid, err := source.GetX509SVID()
	if err != nil {
		_ = source.Close()
		return nil, fmt.Errorf("reading the X509-SVID from the SPIRE agent's Workload API at %s: %w", cfg.WorkloadAPIAddress, err)
	}
	logger.Info("Got spire-registrar's X509-SVID from the SPIRE agent", "workloadAPI", cfg.WorkloadAPIAddress,
		"spiffeID", svid.ID, "serial", svid.Certificates[0].SerialNumber, "expiresAt", svid.Certificates[0].NotAfter,
		"wait", time.Since(start).Round(time.Millisecond))

	stopLogging := make(chan struct{})
	loggingDone := make(chan struct{})
	go func() {
		defer close(loggingDone)
		logRotations(logger, source, svid, stopLogging)
	}()
	// Once: a second Close of the client must not close stopLogging again.
	release := sync.OnceValue(func() error {
		close(stopLogging)
		<-loggingDone
		return source.Close()
	})
	tlsConfig := tlsconfig.MTLSClientConfig(source, source, tlsconfig.AuthorizeID(cfg.SPIREServerID))
	client, err := spire.DialTCP(ctx, cfg.SPIREServerAddress, credentials.NewTLS(tlsConfig), release, opts...)
	if err != nil {
		_ = release()
		return nil, fmt.Errorf("connecting to SPIRE server at %s: %w", cfg.SPIREServerAddress, err)
	}
	client.Identity = svid.ID.String()
	logger.Info("Connecting to the SPIRE server over TCP with SPIFFE mTLS", "address", cfg.SPIREServerAddress,
		"serverID", cfg.SPIREServerID)
	return client, nil
}

// logRotations logs each new X509-SVID the source receives, until stop is closed: the TLS
// config reads the source at every handshake, so these are the certificates presented from
// then on, and an operator can tell a rotation from a stuck agent.
func logRotations(logger klog.Logger, source *workloadapi.X509Source, current *x509svid.SVID, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-source.Updated():
		}
		svid, err := source.GetX509SVID()
		if err != nil {
			continue // closed: stop follows
		}
		leaf := svid.Certificates[0]
		if leaf.SerialNumber.Cmp(current.Certificates[0].SerialNumber) == 0 && svid.ID == current.ID {
			continue // a bundle update
		}
		logger.Info("Rotated spire-registrar's X509-SVID", "spiffeID", svid.ID, "serial", leaf.SerialNumber,
			"notBefore", leaf.NotBefore, "expiresAt", leaf.NotAfter, "previousExpiresAt", current.Certificates[0].NotAfter)
		current = svid
	}
}

// NewX509Source opens a go-spiffe X509Source on the Workload API at address (unix:///path or
// tcp://host:port) and waits at most timeout for its first X509-SVID. The error names the
// address and the likely cause, since an agent that never answers usually means that no
// registration entry selects this process.
func NewX509Source(ctx context.Context, address string, timeout time.Duration, options ...workloadapi.X509SourceOption) (*workloadapi.X509Source, error) {
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	options = append([]workloadapi.X509SourceOption{workloadapi.WithClientOptions(
		workloadapi.WithAddr(address), workloadapi.WithLogger(workloadAPILogger{klog.FromContext(ctx)}))}, options...)
	source, err := workloadapi.NewX509Source(waitCtx, options...)
	if err != nil {
		return nil, fmt.Errorf("no X509-SVID from the SPIRE agent's Workload API at %s within %s (is the agent running there, and does a registration entry select this process?): %w",
			address, timeout, err)
	}
	return source, nil
}

// workloadAPILogger passes go-spiffe's Workload API client messages to klog: its retries
// (agent not up, no identity issued yet) explain a slow start.
type workloadAPILogger struct{ logger klog.Logger }

func (l workloadAPILogger) Debugf(format string, args ...any) {
	l.logger.V(4).Info("Workload API: " + fmt.Sprintf(format, args...))
}

func (l workloadAPILogger) Infof(format string, args ...any) {
	l.logger.V(2).Info("Workload API: " + fmt.Sprintf(format, args...))
}

func (l workloadAPILogger) Warnf(format string, args ...any) {
	l.logger.Info("Warning: Workload API: " + fmt.Sprintf(format, args...))
}

func (l workloadAPILogger) Errorf(format string, args ...any) {
	l.logger.Error(nil, "Workload API: "+fmt.Sprintf(format, args...))
}
