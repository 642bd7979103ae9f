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
	"errors"
	"io/fs"
	"testing"
)

func TestContainerMemoryLimit(t *testing.T) {
	const v2, v1 = "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"
	for _, tc := range []struct {
		name    string
		files   map[string]string
		want    int64
		wantErr bool
	}{
		{"cgroup v2 limit", map[string]string{v2: "1073741824\n"}, 1 << 30, false},
		{"cgroup v2 without a limit", map[string]string{v2: "max\n"}, 0, false},
		{"cgroup v1 limit", map[string]string{v1: "536870912\n"}, 512 << 20, false},
		{"cgroup v1 without a limit", map[string]string{v1: "9223372036854771712\n"}, 0, false},
		{"v2 is read before v1", map[string]string{v2: "1048576", v1: "2097152"}, 1 << 20, false},
		{"no cgroup files: not in a container", nil, 0, false},
		{"a value that is not a number", map[string]string{v2: "lots"}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := containerMemoryLimit(func(name string) ([]byte, error) {
				if v, ok := tc.files[name]; ok {
					return []byte(v), nil
				}
				return nil, fs.ErrNotExist
			})
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("containerMemoryLimit = %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
	_, file, err := containerMemoryLimit(func(string) ([]byte, error) { return nil, fs.ErrPermission })
	if !errors.Is(err, fs.ErrPermission) || file != v2 {
		t.Errorf("an unreadable limit gives %v from %q, want the permission error from %s", err, file, v2)
	}
}
