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
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// TestRunRemovesTheControllersHandlers: once Run has returned, the informers, which outlive
// the controller, no longer call its handlers.
func TestRunRemovesTheControllersHandlers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	informer := factory.Core().V1().Namespaces().Informer()
	var calls atomic.Int32
	var handlers Handlers
	if err := handlers.Add(informer, cache.ResourceEventHandlerFuncs{AddFunc: func(any) { calls.Add(1) }}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	// Shutdown waits for the informers, which stop once ctx is cancelled.
	defer factory.Shutdown()
	defer cancel()
	factory.WaitForCacheSync(ctx.Done())

	runCtx, stop := context.WithCancel(ctx)
	stop()
	Run(runCtx, Loop{Name: "test", Events: NewEvents(ctx, "test", nil, false), Handlers: &handlers})

	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if _, ok, _ := informer.GetStore().GetByKey("late"); ok {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if n := calls.Load(); n != 0 {
		t.Errorf("the handler was called %d times after Run returned", n)
	}
}

// TestUnwrap: a handler gets the object of an event whether it came as itself or, for a
// deletion the informer missed, inside a tombstone; an object of another type is refused.
func TestUnwrap(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}
	for _, tc := range []struct {
		name   string
		obj    any
		want   *corev1.Pod
		wantOK bool
	}{
		{name: "object", obj: pod, want: pod, wantOK: true},
		{name: "tombstone", obj: cache.DeletedFinalStateUnknown{Key: "default/web", Obj: pod}, want: pod, wantOK: true},
		{name: "other type", obj: &corev1.Node{}},
		{name: "tombstone of other type", obj: cache.DeletedFinalStateUnknown{Key: "n", Obj: &corev1.Node{}}},
		{name: "nil", obj: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Unwrap[*corev1.Pod](tc.obj)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("Unwrap = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
