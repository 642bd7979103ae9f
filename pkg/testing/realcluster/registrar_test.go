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

package realcluster

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestParseSeries(t *testing.T) {
	got, err := parseSeries(strings.NewReader(`# HELP x_total Things.
# TYPE x_total counter
x_total{result="success"} 3
x_total{result="error"} 0

up 1.5e+09
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{`x_total{result="success"}`: 3, `x_total{result="error"}`: 0, "up": 1.5e9}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %t), want %v", k, g, ok, v)
		}
	}
	if _, err := parseSeries(strings.NewReader("x_total notanumber\n")); err == nil {
		t.Error("a value that is not a number parsed")
	}
}

// fakeRegistrar prints its arguments and its config file, then sleeps until signalled.
const fakeRegistrar = `#!/bin/sh
echo "args: $*"
cat "$4"
exec sleep 60
`

// TestNewRegistrar runs a fake binary through NewRegistrar: the flags and the config file
// it is given, and SIGTERM when the test that started it ends.
func TestNewRegistrar(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fake-registrar")
	if err := os.WriteFile(bin, []byte(fakeRegistrar), 0o755); err != nil {
		t.Fatal(err)
	}
	var r *Registrar
	t.Run("run", func(t *testing.T) {
		r = NewRegistrar(t, RegistrarOptions{Binary: bin, Kubeconfig: "/kubeconfig", Config: "trustDomain: example.org\n", Flags: []string{"-v=4"}})
		want := regexp.MustCompile(`^args: --kubeconfig /kubeconfig --config \S+/config.yaml ` +
			`--health-probe-bind-address 127\.0\.0\.1:\d+ --metrics-bind-address 127\.0\.0\.1:\d+ -v=2 -v=4\ntrustDomain: example.org\n$`)
		deadline := time.Now().Add(10 * time.Second)
		for !want.MatchString(r.Logs()) {
			if time.Now().After(deadline) {
				t.Fatalf("output %q does not match %s", r.Logs(), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if r.health == r.metrics {
			t.Errorf("health and metrics share %s", r.health)
		}
		if r.Err() != nil || r.Ready() {
			t.Errorf("running fake: Err %v, Ready %t; want nil, false", r.Err(), r.Ready())
		}
	})
	select {
	case <-r.Done():
	default:
		t.Fatal("still running after the test that started it ended")
	}
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "terminated") {
		t.Errorf("Err = %v, want the SIGTERM that stopped it", err)
	}
}
