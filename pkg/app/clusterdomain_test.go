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
	"errors"
	"testing"
)

func TestDetectClusterDomain(t *testing.T) {
	for _, tc := range []struct {
		cname, want string
		err         error
	}{
		{cname: "kubernetes.default.svc.cluster.local.", want: "cluster.local"},
		{cname: "kubernetes.default.svc.prod.example.com.", want: "prod.example.com"},
		{cname: "kubernetes.default.svc."},
		{cname: "something.else."},
		{err: errors.New("no such host")},
	} {
		got, err := detectClusterDomain(context.Background(), func(context.Context, string) (string, error) { return tc.cname, tc.err })
		if tc.want == "" {
			if err == nil {
				t.Errorf("cname %q: detected %q, want an error", tc.cname, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("cname %q: got %q, %v; want %q", tc.cname, got, err, tc.want)
		}
	}
}
