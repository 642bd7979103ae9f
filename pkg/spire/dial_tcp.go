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

package spire

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"k8s.io/klog/v2"
)

// DialTCP returns a client for the SPIRE server API at address (host:port) over TCP with
// creds, typically SPIFFE mTLS with the caller's own X509-SVID: the server then grants the
// admin API to callers whose SVID an admin entry issued. Like Dial it does not connect.
// release, if not nil, is called by Close after the connection is closed, to free what creds
// hold (such as a Workload API X509Source). opts are appended to the client's defaults.
func DialTCP(ctx context.Context, address string, creds credentials.TransportCredentials, release func() error, opts ...grpc.DialOption) (*Client, error) {
	if address == "" {
		return nil, errors.New("spire server address is empty")
	}
	if creds == nil {
		return nil, errors.New("spire server over TCP needs transport credentials")
	}
	// gRPC's default dns resolver: a Service name or an IP address, as given.
	c, err := dial("dns:///"+address, creds, opts)
	if err != nil {
		return nil, err
	}
	c.release = release
	klog.FromContext(ctx).V(2).Info("Created SPIRE server client", "address", address)
	return c, nil
}
