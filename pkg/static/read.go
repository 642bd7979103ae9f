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
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// A manifest is read only if it is a regular file, after following symlinks (a mounted
// ConfigMap's files are symlinks into its ..data directory), and only up to a size cap. A
// FIFO, socket or device is never opened: opening a FIFO blocks until a writer comes, and a
// device can be endless (/dev/zero) or act when opened. A file over the cap is not read at
// all, and one that grows past it while read is read no further than the cap. Whatever is
// not read says nothing about what the file declares, so the file keeps what it declared.

// Default caps. A Kubernetes object is at most about 1.5 MiB (etcd's request limit) and a
// ConfigMap's data at most 1 MiB, so a manifest file of 4 MiB holds more resources than a
// cluster could hold in one object; 64 MiB in all is some 200,000 ClusterStaticEntries.
const (
	DefaultMaxFileSize  = 4 << 20
	DefaultMaxTotalSize = 64 << 20
)

// racyWindow is how recent a file's timestamps may be for its stat to be trusted to say its
// content is unchanged. File timestamps are coarse (a clock tick on Linux, up to 2 s on some
// filesystems), so a write in the same tick as the read can leave size and times as they
// were; a file is read again until a read starts this long after its last change.
const racyWindow = 2 * time.Second

// fileID is what stat says of a file's content: equal IDs, of a read trusted by
// trustedAfterRead, mean an unchanged file that needs no reading.
type fileID struct {
	dev, ino uint64
	size     int64
	// mtime and ctime are in nanoseconds since the epoch.
	mtime, ctime int64
}

func identify(info fs.FileInfo) fileID {
	id := fileID{size: info.Size(), mtime: info.ModTime().UnixNano()}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino = uint64(st.Dev), st.Ino //nolint:unconvert // Dev is not uint64 on every platform.
		id.ctime = st.Ctim.Nano()
	}
	return id
}

// trustedAfterRead says whether a read that started at readStart can stand for the file's
// content for as long as its ID stays the same.
func (id fileID) trustedAfterRead(readStart time.Time) bool {
	return max(id.mtime, id.ctime) < readStart.Add(-racyWindow).UnixNano()
}

// errChangedWhileRead says a file changed while it was read: what was read is no content the
// file ever held whole, so it is read again at the next poll.
var errChangedWhileRead = errors.New("changed while read")

// unreadable says why the manifest at path was not read, naming the path once.
func unreadable(path string, err error) error {
	if pathErr, ok := errors.AsType[*fs.PathError](err); ok {
		err = fmt.Errorf("%s: %w", pathErr.Op, pathErr.Err)
	}
	return fmt.Errorf("%s: %w", path, err)
}

// checkRegular returns why a file of this mode is not read, or nil for a regular file.
func checkRegular(path string, mode fs.FileMode) error {
	if mode.IsRegular() {
		return nil
	}
	var what string
	switch {
	case mode&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case mode&fs.ModeSocket != 0:
		what = "a socket"
	case mode&fs.ModeCharDevice != 0:
		what = "a character device"
	case mode&fs.ModeDevice != 0:
		what = "a device"
	default:
		what = "not a regular file (" + mode.Type().String() + ")"
	}
	return fmt.Errorf("%s: %s, not a regular file: not read", path, what)
}

func checkSize(path string, size, maxSize int64) error {
	if size <= maxSize {
		return nil
	}
	return fmt.Errorf("%s: larger than staticManifestLimits.maxFileSize (%s): not read",
		path, resource.NewQuantity(maxSize, resource.BinarySI))
}

// statManifest returns what the file at path, symlinks followed, is.
func statManifest(path string) (fs.FileInfo, error) {
	info, err := os.Stat(path)
	if err != nil {
		// Among others, ELOOP for a symlink loop and ENOENT for a dangling symlink.
		return nil, unreadable(path, err)
	}
	return info, nil
}

// readManifest reads the regular file at path, at most maxSize bytes of it, and returns its
// content with the ID it had while read and when the read started. It never blocks on what
// is not a regular file: the file is opened non-blocking and checked again once open, since
// it may have been replaced after it was stat'ed. A file that changed while read returns
// errChangedWhileRead.
func readManifest(path string, maxSize int64) ([]byte, fileID, time.Time, error) {
	readStart := time.Now()
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fileID{}, readStart, unreadable(path, err)
	}
	defer func() { _ = f.Close() }()
	before, err := f.Stat()
	if err != nil {
		return nil, fileID{}, readStart, unreadable(path, err)
	}
	if err := checkRegular(path, before.Mode()); err != nil {
		return nil, fileID{}, readStart, err
	}
	if err := checkSize(path, before.Size(), maxSize); err != nil {
		return nil, fileID{}, readStart, err
	}
	// The size stat gives is only a hint (files of /proc say 0); the limit is what bounds.
	buf := bytes.NewBuffer(make([]byte, 0, before.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, maxSize+1)); err != nil {
		return nil, fileID{}, readStart, unreadable(path, err)
	}
	if err := checkSize(path, int64(buf.Len()), maxSize); err != nil {
		return nil, fileID{}, readStart, err
	}
	after, err := f.Stat()
	if err != nil {
		return nil, fileID{}, readStart, unreadable(path, err)
	}
	if id := identify(before); id != identify(after) {
		return nil, fileID{}, readStart, errChangedWhileRead
	}
	return buf.Bytes(), identify(after), readStart, nil
}
