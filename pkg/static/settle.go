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

package static

import (
	"crypto/sha256"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
)

// A file's content is acted on only once it has settled: the same bytes read again at least
// one poll interval after they were first read. A writer that is not atomic (`cat > file`,
// an editor that truncates then writes, a copy) leaves a prefix of the new content for a
// while, and a prefix can decode: a YAML stream cut after its first document declares fewer
// resources (deletes), a selectors list cut short declares an entry with fewer selectors (a
// wider grant). Until a content settles, the file keeps what it declared before.
//
// The settle time is one poll interval: such writes take micro- to milliseconds, a second
// more per edit is cheap next to a wrong delete, and the next poll is the second read, so
// no timer of its own is needed.
//
// Content that declares nothing where the file declared something must stay unchanged for
// emptySettleFactor poll intervals instead (30 s by default). Truncating is the first step of
// `>` redirection, and a generator writing into the file (helm template, kustomize build)
// can take seconds before its first byte; an empty file for that long must not delete
// everything it declared. Removing the file deletes what it declared at the next poll.
const emptySettleFactor = 30

// fileState is what a file declares, and what it holds that has not settled yet.
type fileState struct {
	// settled says a content has settled; hash is that content's.
	settled bool
	hash    [sha256.Size]byte
	// objects are what the file declared when a settled content last decoded.
	objects []object
	// err is why the settled content does not decode, if it does not.
	err error

	// pending says the file holds content other than the settled one, with hash
	// pendingHash, read unchanged since pendingSince.
	pending      bool
	pendingHash  [sha256.Size]byte
	pendingSince time.Time
	// heldEmpty says the pending content declares nothing and waits for emptySettle.
	heldEmpty bool
	// refused says why the pending content, settled, was not applied: it would take the
	// manifests over the total cap. It is weighed again at each poll.
	refused error

	// size is the bytes of the content applied, charged against the total cap.
	size int64
	// id is what stat said of the content last read; when idTrusted, the same id means the
	// same content, which is not read again.
	id        fileID
	idTrusted bool
}

// unchanged says whether a file that stat now says is id holds the content last read, which
// then need not be read: its state is settled and its last read can be trusted.
func (state *fileState) unchanged(id fileID) bool {
	return state != nil && !state.pending && state.idTrusted && state.id == id
}

// heldSize is the bytes the file's applied content is charged against the total cap.
func (state *fileState) heldSize() int64 {
	if state == nil {
		return 0
	}
	return state.size
}

// changing returns the state of a file that changed while it was read: what it declared
// stays, and the content read, which the file never held whole, settles nothing.
func (state *fileState) changing(now time.Time) *fileState {
	next := &fileState{}
	if state != nil {
		*next = *state
	}
	next.pending, next.pendingHash, next.pendingSince, next.heldEmpty = true, [sha256.Size]byte{}, now, false
	next.idTrusted, next.refused = false, nil
	return next
}

// problems are what is wrong with the file now.
func (state *fileState) problems() []error {
	var errs []error
	if state.err != nil {
		errs = append(errs, state.err)
	}
	if state.refused != nil {
		errs = append(errs, state.refused)
	}
	return errs
}

// observe returns the state of the file at path after reading data from it, previously
// prev (nil for a file not seen before). A content is decoded only once it has settled; one
// that does not decode, or is larger than room, the bytes the total cap leaves it, keeps
// what the file declared before.
func (s *Source) observe(logger klog.Logger, path string, prev *fileState, data []byte, room int64) *fileState {
	hash := sha256.Sum256(data)
	now := s.clock.Now()
	state := &fileState{}
	if prev != nil {
		*state = *prev
	}
	state.refused = nil
	if state.settled && hash == state.hash {
		// Back to what is applied: nothing to wait for.
		state.pending, state.heldEmpty = false, false
		return state
	}
	if !state.pending || state.pendingHash != hash {
		state.pending, state.pendingHash, state.pendingSince, state.heldEmpty = true, hash, now, false
		logger.V(2).Info("Static manifest changed; keeping what it declared until its content settles",
			"file", path, "bytes", len(data), "settle", s.interval)
		return state
	}
	waited := now.Sub(state.pendingSince)
	if waited < s.interval {
		return state
	}
	if int64(len(data)) > room {
		state.refused = fmt.Errorf("%s: its %d bytes would take the manifests over staticManifestLimits.maxTotalSize (%s): not applied",
			path, len(data), resource.NewQuantity(s.maxTotalSize, resource.BinarySI))
		return state
	}
	objs, err := decodeFile(data, s.expandEnv)
	if err != nil {
		state.settled, state.hash, state.err = true, hash, fmt.Errorf("%s: %w", path, err)
		state.pending, state.heldEmpty = false, false
		return state
	}
	if emptySettle := emptySettleFactor * s.interval; len(objs) == 0 && len(state.objects) > 0 && waited < emptySettle {
		if !state.heldEmpty {
			state.heldEmpty = true
			logger.Info("Static manifest declares nothing now; keeping what it declared until it stays so (remove the file to delete at once)",
				"file", path, "declared", len(state.objects), "hold", emptySettle)
		}
		return state
	}
	state.settled, state.hash, state.objects, state.err, state.size = true, hash, objs, nil, int64(len(data))
	state.pending, state.heldEmpty = false, false
	return state
}
