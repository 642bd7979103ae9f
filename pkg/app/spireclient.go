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

	"google.golang.org/grpc"

	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// DialSPIRE returns a client for the SPIRE server the config names, with the config's gRPC
// settings (grpc.maxCallRecvMsgSize). The caller closes it.
func DialSPIRE(ctx context.Context, cfg *config.Config) (*spire.Client, error) {
	var opts []grpc.DialOption
	if cfg.GRPCMaxCallRecvMsgSize > 0 {
		// Appended after the client's defaults, so this limit wins.
		opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(cfg.GRPCMaxCallRecvMsgSize)))
	}
	client, err := spire.Dial(ctx, cfg.SPIREServerSocketPath, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to SPIRE server at %s: %w", cfg.SPIREServerSocketPath, err)
	}
	return client, nil
}
