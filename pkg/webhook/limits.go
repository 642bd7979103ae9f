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

package webhook

import (
	"time"

	"github.com/spire-registrar/spire-registrar/pkg/serving"
)

// maxReviewBytes bounds an AdmissionReview body. etcd stores objects of at most 1.5 MiB and a
// review carries at most the object and its old version, so 3 MiB (also the API server's own
// limit on a request body) plus 64 KiB for the review around them holds every review of an
// object that can be stored. A larger body is refused with 413 before it is read.
const maxReviewBytes = 3<<20 + 64<<10

// serverLimits are what the webhook's clients may cost it. The API server calls a webhook with
// a timeout of 10 s unless its configuration says otherwise (the chart's does not); every
// bound here keeps a review that arrives in one go answered well within it, whatever other
// clients do. Every field is set; tests shorten them.
type serverLimits struct {
	// Limits bound time, headers and connections, as for the health and metrics servers:
	// ReadTimeout (a handshake, headers and body) is half the API server's timeout, leaving
	// the other half to a call it retries after a 429. WriteTimeout runs from the end of
	// the headers to the end of the answer; IdleTimeout is longer than the API server's own
	// (Go's default transport: 90 s), so that the client, not we, ends an idle connection.
	serving.Limits
	// bodyBytes is the memory all reviews being read or validated hold at once (the bodies'
	// buffers; decoding costs about twice more), and bodyBytesPerAddress one client address's
	// share of it: a stalled or slow client holds the bytes it has sent, and no slot.
	bodyBytes, bodyBytesPerAddress int64
	// reviewSlots bounds the reviews validated at once, and so the CPU they take. A review
	// takes a slot only once its body is read; it waits for one within validationTimeout.
	reviewSlots int
	// validationTimeout bounds the wait for a slot and the validation: a review not decided
	// by then is refused (a validation that overran) or answered 429 (no slot came free),
	// never left to the API server's timeout, which with failurePolicy Ignore admits it.
	// Validation takes milliseconds; an overrunning one keeps its slot until it ends.
	validationTimeout time.Duration
}

// defaultLimits are the limits the webhook serves with.
func defaultLimits() serverLimits {
	return serverLimits{
		Limits: serving.Limits{
			ReadTimeout:    5 * time.Second,
			WriteTimeout:   10 * time.Second,
			IdleTimeout:    120 * time.Second,
			MaxHeaderBytes: 32 << 10,
			// Each a goroutine and TLS buffers; the API server keeps a few per replica.
			MaxConns:           256,
			MaxConnsPerAddress: 64,
			// The API server sends one review per stream; more connections carry more.
			MaxStreams:   16,
			StreamBuffer: 256 << 10,
		},
		bodyBytes:           16 * maxReviewBytes,
		bodyBytesPerAddress: 4 * maxReviewBytes,
		reviewSlots:         16,
		validationTimeout:   2 * time.Second,
	}
}

const (
	// retryAfterSeconds is the Retry-After of a 429: the API server's client waits this long
	// before it calls again, well within its default 10 s timeout.
	retryAfterSeconds = "1"
	// A denial's message lists the first maxListedErrors errors, then how many more there
	// are. In each, the value is cut to maxValueBytes and the detail to maxDetailBytes; an
	// error is at most maxErrorBytes whatever its value's type.
	maxListedErrors = 16
	maxValueBytes   = 256
	maxDetailBytes  = 1024
	maxErrorBytes   = 2048
)
