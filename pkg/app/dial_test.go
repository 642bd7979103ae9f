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
	"net"
	"testing"
	"time"
)

// TestPatientDialWaitsForTheServer: a dial to a port nobody listens on waits, and connects
// within a retry of the listener's return; a dial that never connects gives up at its limit.
func TestPatientDialWaitsForTheServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	p := patientDialing{retry: 50 * time.Millisecond, limit: 5 * time.Second}
	dial := p.wrap((&net.Dialer{}).DialContext)

	back := make(chan time.Time, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Error(err)
			back <- time.Now()
			return
		}
		t.Cleanup(func() { _ = l.Close() })
		back <- time.Now()
	}()
	conn, err := dial(context.Background(), "tcp", addr)
	connected := time.Now()
	if err != nil {
		t.Fatalf("gave up: %v", err)
	}
	_ = conn.Close()
	if late := connected.Sub(<-back); late > 2*p.retry {
		t.Errorf("connected %v after the server came back, retry is %v", late, p.retry)
	}

	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln2.Addr().String()
	_ = ln2.Close()
	p.limit = 200 * time.Millisecond
	start := time.Now()
	if _, err := p.wrap((&net.Dialer{}).DialContext)(context.Background(), "tcp", gone); err == nil {
		t.Fatal("connected to nothing")
	}
	if waited := time.Since(start); waited > time.Second {
		t.Errorf("gave up after %v, limit %v", waited, p.limit)
	}
}
