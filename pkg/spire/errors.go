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
	"fmt"

	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ItemError is the failure of one item of a batch RPC, as reported in the
// item's own status by the SPIRE server. The RPC itself succeeded.
type ItemError struct {
	// Op names the operation, e.g. "create entry".
	Op string
	// Key identifies the item when known: an entry ID or a trust domain name.
	Key string
	// Code is the item's status code.
	Code codes.Code
	// Message is the server's developer-facing message.
	Message string
}

// Error implements error.
func (e *ItemError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("%s: %s: %s", e.Op, e.Code, e.Message)
	}
	return fmt.Sprintf("%s %q: %s: %s", e.Op, e.Key, e.Code, e.Message)
}

// GRPCStatus lets status.Code and status.FromError see through an item error,
// so callers treat per-item and RPC-level failures alike.
func (e *ItemError) GRPCStatus() *status.Status {
	return status.New(e.Code, e.Message)
}

// IsAlreadyExists reports whether err, or an error it wraps, carries the
// ALREADY_EXISTS code.
func IsAlreadyExists(err error) bool {
	return err != nil && status.Code(err) == codes.AlreadyExists
}

// IsNotFound reports whether err, or an error it wraps, carries the NOT_FOUND
// code.
func IsNotFound(err error) bool {
	return err != nil && status.Code(err) == codes.NotFound
}

// IsUnavailable reports whether err, or an error it wraps, carries the
// UNAVAILABLE code, which is what calls return while the server is down.
func IsUnavailable(err error) bool {
	return err != nil && status.Code(err) == codes.Unavailable
}

// itemErr turns an item status into an error; nil for OK. A missing status is
// treated as a protocol violation rather than success, so that an item is
// never assumed written without the server saying so.
func itemErr(op, key string, st *types.Status) error {
	if st == nil {
		return &ItemError{Op: op, Key: key, Code: codes.Unknown, Message: "server returned no status for item"}
	}
	if codes.Code(st.GetCode()) == codes.OK {
		return nil
	}
	return &ItemError{Op: op, Key: key, Code: codes.Code(st.GetCode()), Message: st.GetMessage()}
}
