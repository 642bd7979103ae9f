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
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// boundedConn gives every unary call on cc a deadline timeout from its start; a deadline
// the caller's context already has wins when it is sooner. Every SPIRE method the client
// calls is unary, so no call can wait without bound.
type boundedConn struct {
	cc      grpc.ClientConnInterface
	timeout time.Duration
	// reach learns from every call's outcome whether SPIRE answers.
	reach *Reachability
}

var _ grpc.ClientConnInterface = (*boundedConn)(nil)

// Invoke runs one unary call within the deadline. When the client's own deadline ends it,
// the error keeps codes.DeadlineExceeded and says which bound was hit.
func (b *boundedConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	deadline := time.Now().Add(b.timeout)
	d, ok := ctx.Deadline()
	callerFirst := ok && !d.After(deadline)
	callCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	err := b.cc.Invoke(callCtx, method, args, reply, opts...)
	b.reach.observe(ctx, err)
	// The server, told the deadline, may end the call a moment before the client does; a
	// DeadlineExceeded of its own long before the bound is passed on as it is.
	slack := min(time.Second, b.timeout/10)
	if !callerFirst && ctx.Err() == nil && status.Code(err) == codes.DeadlineExceeded && time.Until(deadline) < slack {
		return status.Errorf(codes.DeadlineExceeded, "spire server did not answer %s within %s: %v", method, b.timeout, status.Convert(err).Message())
	}
	return err
}

// NewStream passes streams through unbounded: a stream lives as long as its caller wants,
// and the client opens none.
func (b *boundedConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return b.cc.NewStream(ctx, desc, method, opts...)
}
