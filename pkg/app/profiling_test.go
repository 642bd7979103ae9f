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
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestWithProfilingServesHeapProfilesAndMetrics(t *testing.T) {
	server := httptest.NewServer(withProfiling(MetricsHandler()))
	defer server.Close()

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(server.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}
	if code, body := get("/debug/pprof/heap?debug=1"); code != http.StatusOK || !strings.Contains(body, "heap profile") {
		t.Errorf("GET /debug/pprof/heap: %d %.80q, want 200 and a heap profile", code, body)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "spire_registrar_") {
		t.Errorf("GET /metrics: %d, want 200 and spire_registrar_ metrics; body %.200q", code, body)
	}
}
