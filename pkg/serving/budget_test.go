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

package serving

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestBudgetHoldsWhatArrived: a body holds what it has sent (in chunks of bodyChunk, never
// past the declared length), frees it on release; one shorter than declared fails, and one
// over the cap fails with *http.MaxBytesError, holding nothing.
func TestBudgetHoldsWhatArrived(t *testing.T) {
	b := NewBudget(1<<20, 1<<20)
	body := strings.Repeat("x", 100<<10)
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	got, release, err := b.ReadBody(httptest.NewRecorder(), r, 200<<10)
	if err != nil || string(got) != body {
		t.Fatalf("read %d bytes, err %v; want the %d-byte body", len(got), err, len(body))
	}
	if b.used != int64(len(body)) {
		t.Errorf("a %d-byte body with its length declared holds %d bytes", len(body), b.used)
	}
	release()
	if b.used != 0 || len(b.byAddress) != 0 {
		t.Errorf("after release %d bytes are held (%v)", b.used, b.byAddress)
	}

	r = httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	r.ContentLength = int64(len(body)) + 1
	if _, _, err := b.ReadBody(httptest.NewRecorder(), r, 200<<10); err == nil {
		t.Error("a body shorter than its declared length was read as complete")
	}

	r = httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	r.ContentLength = -1
	_, _, err = b.ReadBody(httptest.NewRecorder(), r, 50<<10)
	var tooLarge *http.MaxBytesError
	if !errors.As(err, &tooLarge) {
		t.Errorf("a body over the cap: err %v, want *http.MaxBytesError", err)
	}
	if b.used != 0 {
		t.Errorf("a refused body left %d bytes held", b.used)
	}
}

// TestBudgetSlowBodyGivesWay: when a body does not fit, the one that has been arriving
// longest, past slowBody, gives way; a body arriving for less than that never does, and
// then the newcomer is refused. An address over its share takes only from its own.
func TestBudgetSlowBodyGivesWay(t *testing.T) {
	clock := time.Unix(1000, 0)
	b := NewBudget(100, 60)
	b.now = func() time.Time { return clock }
	var gaveWay []string
	start := func(name, address string, held int64) *bodyRead {
		read := &bodyRead{address: address, started: clock, arriving: true}
		read.giveWay = func() {
			b.mu.Lock()
			gaveWay = append(gaveWay, name)
			b.mu.Unlock()
			b.release(read) // as the reader does when its connection is closed
		}
		b.mu.Lock()
		b.reading[read] = struct{}{}
		b.mu.Unlock()
		if err := b.hold(read, held); err != nil {
			t.Fatalf("%s could not hold %d bytes: %v", name, held, err)
		}
		return read
	}

	start("old", "10.0.0.2", 50)
	clock = clock.Add(2 * slowBody)
	start("recent", "10.0.0.3", 40)
	newcomer := start("newcomer", "10.0.0.1", 0)
	if err := b.hold(newcomer, 30); err != nil {
		t.Fatalf("the newcomer did not get bytes from the slow body: %v", err)
	}
	if len(gaveWay) != 1 || gaveWay[0] != "old" {
		t.Errorf("gave way: %v, want only the body arriving longest", gaveWay)
	}
	// Now only recent bodies are in the way.
	if err := b.hold(newcomer, 50); !errors.Is(err, ErrBudgetExhausted) {
		t.Errorf("with only recent bodies in the way: err %v, want ErrBudgetExhausted", err)
	}

	// An address over its share takes from its own slow body, not from another's.
	clock = clock.Add(2 * slowBody)
	gaveWay = nil
	own := start("own", "10.0.0.3", 20)
	_ = own
	if err := b.hold(own, 10); err != nil {
		t.Fatalf("within its share: %v", err)
	}
	if len(gaveWay) != 1 || gaveWay[0] != "recent" {
		t.Errorf("gave way: %v, want the address's own slow body", gaveWay)
	}
}
