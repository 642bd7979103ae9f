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
	"io"
	"net/http"
	"sync"
	"time"
)

// ErrBudgetExhausted is ReadBody's error when the bodies being read hold the whole budget, or
// the client's address its share, and none of them is slow enough to give way.
var ErrBudgetExhausted = errors.New("too many request bytes held at once")

// Budget bounds the memory of request bodies held at once, in total and per client address,
// across every connection of a server. A body holds the bytes it has sent, in chunks of at
// most bodyChunk and never past its declared length (once complete, its joined copy replaces
// the chunks), and no slot of any kind while it arrives. When a body does not fit, the one
// that has been arriving longest, if longer than slowBody, gives way: its connection is
// closed and its bytes freed. A client that sends its body in one go, as kube-apiserver does,
// is never that one.
type Budget struct {
	total, perAddress int64

	mu        sync.Mutex
	freed     *sync.Cond
	used      int64
	byAddress map[string]int64
	reading   map[*bodyRead]struct{}
	now       func() time.Time
}

const (
	// bodyChunk is the unit a body is read in: an ordinary review fits in one.
	bodyChunk = 64 << 10
	// slowBody is how long a body may arrive before it gives way to another: kube-apiserver
	// writes a review of a few MiB in milliseconds on any cluster network.
	slowBody = time.Second
	// giveWayWait bounds how long a body waits for the bytes of one that gave way.
	giveWayWait = time.Second
)

// NewBudget returns a budget of total bytes, of which one client address may hold perAddress.
func NewBudget(total, perAddress int64) *Budget {
	b := &Budget{total: total, perAddress: perAddress, byAddress: map[string]int64{},
		reading: map[*bodyRead]struct{}{}, now: time.Now}
	b.freed = sync.NewCond(&b.mu)
	return b
}

// bodyRead is one body's claim on the budget.
type bodyRead struct {
	address  string
	held     int64
	started  time.Time
	arriving bool
	giveWay  func()
}

// ReadBody reads r's body, of at most maxBytes bytes, holding its bytes from the budget as it
// arrives. release frees them; call it once the body is no longer used. On error nothing is
// held. A body over maxBytes fails with *http.MaxBytesError.
func (b *Budget) ReadBody(w http.ResponseWriter, r *http.Request, maxBytes int64) (body []byte, release func(), err error) {
	read := &bodyRead{address: hostOf(r.RemoteAddr), started: b.now(), arriving: true,
		giveWay: func() { closeConnection(r.Context()) }}
	b.mu.Lock()
	b.reading[read] = struct{}{}
	b.mu.Unlock()
	defer func() {
		if err != nil {
			b.release(read)
		}
	}()

	limit := maxBytes + 1 // room to see a body over maxBytes
	if r.ContentLength >= 0 {
		limit = min(limit, r.ContentLength)
	}
	in := http.MaxBytesReader(w, r.Body, maxBytes)
	var chunks [][]byte
	var total int64
	for total < limit {
		size := min(bodyChunk, limit-total)
		if err := b.hold(read, size); err != nil {
			return nil, nil, err
		}
		chunk, err := readChunk(in, size)
		chunks = append(chunks, chunk)
		total += int64(len(chunk))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if r.ContentLength > total {
		return nil, nil, io.ErrUnexpectedEOF
	}
	body, err = b.join(read, chunks, total)
	if err != nil {
		return nil, nil, err
	}
	b.mu.Lock()
	read.arriving = false
	b.mu.Unlock()
	return body, func() { b.release(read) }, nil
}

// readChunk reads up to size bytes, fewer only at the end of the body (io.EOF) or on an error.
func readChunk(in io.Reader, size int64) ([]byte, error) {
	chunk := make([]byte, size)
	n := 0
	for n < len(chunk) {
		m, err := in.Read(chunk[n:])
		n += m
		if err != nil {
			return chunk[:n], err
		}
	}
	return chunk, nil
}

// join returns chunks as one slice. Its copy is held first; the chunks' bytes are let go
// after.
func (b *Budget) join(read *bodyRead, chunks [][]byte, total int64) ([]byte, error) {
	if len(chunks) == 1 {
		return chunks[0], nil
	}
	b.mu.Lock()
	chunksHeld := read.held
	b.mu.Unlock()
	if err := b.hold(read, total); err != nil {
		return nil, err
	}
	body := make([]byte, 0, total)
	for _, c := range chunks {
		body = append(body, c...)
	}
	b.mu.Lock()
	b.takeLocked(read, chunksHeld)
	b.mu.Unlock()
	return body, nil
}

// hold adds n bytes to read's claim. When they do not fit, the slowest bodies in the way give
// way, and hold waits a moment for their bytes.
func (b *Budget) hold(read *bodyRead, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	deadline := time.Now().Add(giveWayWait)
	var asked []*bodyRead
	for {
		fitsTotal := b.used+n <= b.total
		fitsAddress := b.byAddress[read.address]+n <= b.perAddress
		if fitsTotal && fitsAddress {
			b.used += n
			b.byAddress[read.address] += n
			read.held += n
			return nil
		}
		address := ""
		if !fitsAddress {
			address = read.address
		}
		if slow := b.slowestLocked(read, address); slow != nil {
			slow.arriving = false // it gives way once
			asked = append(asked, slow)
			go slow.giveWay()
		} else if !b.anyReadingLocked(asked) || !time.Now().Before(deadline) {
			return ErrBudgetExhausted
		}
		// The timer takes the lock, so that its wake-up cannot come before Wait.
		timer := time.AfterFunc(time.Until(deadline), func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.freed.Broadcast()
		})
		b.freed.Wait()
		timer.Stop()
	}
}

// anyReadingLocked reports whether any of reads still holds its bytes.
func (b *Budget) anyReadingLocked(reads []*bodyRead) bool {
	for _, r := range reads {
		if _, ok := b.reading[r]; ok {
			return true
		}
	}
	return false
}

// slowestLocked is the body, of address or of any, that has been arriving longest, if that
// is longer than slowBody.
func (b *Budget) slowestLocked(except *bodyRead, address string) *bodyRead {
	var slowest *bodyRead
	cutoff := b.now().Add(-slowBody)
	for r := range b.reading {
		if r == except || !r.arriving || r.held == 0 || (address != "" && r.address != address) || !r.started.Before(cutoff) {
			continue
		}
		if slowest == nil || r.started.Before(slowest.started) {
			slowest = r
		}
	}
	return slowest
}

func (b *Budget) release(read *bodyRead) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.reading[read]; !ok {
		return
	}
	delete(b.reading, read)
	b.takeLocked(read, read.held)
}

// takeLocked lets n of read's bytes go.
func (b *Budget) takeLocked(read *bodyRead, n int64) {
	read.held -= n
	b.used -= n
	if b.byAddress[read.address] -= n; b.byAddress[read.address] <= 0 {
		delete(b.byAddress, read.address)
	}
	b.freed.Broadcast()
}
