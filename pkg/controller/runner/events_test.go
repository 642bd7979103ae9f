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

package runner

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

func createdEvents(kube *k8sfake.Clientset) int {
	n := 0
	for _, a := range kube.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "events" {
			n++
		}
	}
	return n
}

// TestEventsOnlyLogged: Events reach the API unless they are only logged, as in a dry run.
// The recorded case shows how long an Event takes to arrive; the only-logged case waits as
// long again before it concludes none came.
func TestEventsOnlyLogged(t *testing.T) {
	var arrival time.Duration
	for _, tc := range []struct {
		name    string
		onlyLog bool
		want    int
	}{
		{name: "recorded", want: 1},
		{name: "only logged", onlyLog: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			kube := k8sfake.NewClientset()
			events := NewEvents(ctx, "test-events", kube, tc.onlyLog)
			if got := events.onlyLogged(); got != tc.onlyLog {
				t.Errorf("onlyLogged = %v, want %v", got, tc.onlyLog)
			}
			events.Start()
			defer events.Shutdown()
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web"}}
			start := time.Now()
			events.Recorder.Event(pod, corev1.EventTypeWarning, "Testing", "an event")
			wait := 5 * time.Second
			if tc.want == 0 {
				wait = 2*arrival + 200*time.Millisecond
			}
			deadline := start.Add(wait)
			for createdEvents(kube) < tc.want && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if tc.want == 0 {
				time.Sleep(time.Until(deadline))
			}
			arrival = time.Since(start)
			if got := createdEvents(kube); got != tc.want {
				t.Errorf("Events created = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestOnlyLoggedEventsAreLoggedByDefault: where Events are only logged (static mode, which has
// no kube client, and a dry run), the log is the only place to read them, so they are logged
// at the default verbosity.
func TestOnlyLoggedEventsAreLoggedByDefault(t *testing.T) {
	for _, tc := range []struct {
		name    string
		kube    bool
		onlyLog bool
	}{
		{name: "static mode"},
		{name: "dry run", kube: true, onlyLog: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(0), ktesting.BufferLogs(true)))
			ctx := klog.NewContext(context.Background(), logger)
			var kube *k8sfake.Clientset
			var events *Events
			if tc.kube {
				kube = k8sfake.NewClientset()
				events = NewEvents(ctx, "test-events", kube, tc.onlyLog)
			} else {
				events = NewEvents(ctx, "test-events", nil, tc.onlyLog)
			}
			if !events.onlyLogged() {
				t.Fatal("Events would be sent to the API")
			}
			events.Start()
			defer events.Shutdown()

			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web"}}
			events.Recorder.Event(pod, corev1.EventTypeWarning, "Testing", "an event")
			buffer := logger.GetSink().(ktesting.Underlier).GetBuffer()
			if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
				return strings.Contains(buffer.String(), `reason="Testing"`), nil
			}); err != nil {
				t.Errorf("the Event was not logged at verbosity 0; log:\n%s", buffer.String())
			}
			if kube != nil && createdEvents(kube) != 0 {
				t.Errorf("an only-logged Event reached the API")
			}
		})
	}
}

// onlyLogged reports whether Events stay out of the API.
func (e *Events) onlyLogged() bool {
	return e.sink == nil
}

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    string
		n    int
		want string
	}{
		{name: "short", s: "no bundle", n: 9, want: "no bundle"},
		{name: "long", s: "no bundle for example.org", n: 9, want: "no bundle…"},
		{name: "cut inside a character", s: "trust domain «a»", n: 14, want: "trust domain …"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Truncate(tc.s, tc.n); got != tc.want {
				t.Errorf("Truncate(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
			}
		})
	}
}
