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
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkPollAtRest is one poll of a directory where nothing changed: 100 files of 100
// ClusterStaticEntries each (about 3.6 MiB in all), written long enough ago for stat to vouch
// for them.
func BenchmarkPollAtRest(b *testing.B) {
	dir := b.TempDir()
	for f := range 100 {
		var content strings.Builder
		for e := range 100 {
			name := fmt.Sprintf("e-%d-%d", f, e)
			content.WriteString("---\n" + entryNamed(name, "spiffe://example.org/"+name))
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("m%d.yaml", f)), []byte(content.String()), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	source, err := NewSource(context.Background(), dir, Options{PollInterval: time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(racyWindow + 100*time.Millisecond)
	source.poll(context.Background())
	b.ReportAllocs()
	for b.Loop() {
		source.poll(context.Background())
	}
}
