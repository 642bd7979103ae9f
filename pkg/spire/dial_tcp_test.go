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
	"errors"
	"testing"

	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2/ktesting"
)

// Close releases what the credentials hold (the Workload API source) once, after the
// connection, and reports its error.
func TestDialTCPCloseReleasesTheCredentials(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	released := 0
	errSource := errors.New("source already closed")
	client, err := DialTCP(ctx, "127.0.0.1:1", insecure.NewCredentials(), func() error { released++; return errSource })
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Close(); !errors.Is(err, errSource) {
		t.Errorf("Close() = %v, want the release error", err)
	}
	if released != 1 {
		t.Errorf("release called %d times, want 1", released)
	}
}

func TestDialTCPRefusesMissingParts(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	if _, err := DialTCP(ctx, "", insecure.NewCredentials(), nil); err == nil {
		t.Error("DialTCP accepted an empty address")
	}
	if _, err := DialTCP(ctx, "127.0.0.1:8081", nil, nil); err == nil {
		t.Error("DialTCP accepted no credentials")
	}
}
