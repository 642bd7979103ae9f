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

package informercache

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// optionsRecorder is a ListerWatcher that records the options of its calls.
type optionsRecorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *optionsRecorder) record(kind string, o metav1.ListOptions) {
	r.mu.Lock()
	defer r.mu.Unlock()
	call := kind + " rv=" + o.ResourceVersion
	if o.SendInitialEvents != nil && *o.SendInitialEvents {
		call += " initial"
	}
	r.calls = append(r.calls, call)
}

func (r *optionsRecorder) ListWithContext(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
	r.record("list", o)
	return &corev1.PodList{}, nil
}

func (r *optionsRecorder) WatchWithContext(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
	r.record("watch", o)
	return watch.NewFake(), nil
}

// TestRelistReadsTheCurrentState: after relist, the next list (or watch-list stream) asks for
// the API server's current state, not for anything as recent as the last synced resource
// version, which a watch cache may serve unchanged for a quiet kind; later ones do not.
func TestRelistReadsTheCurrentState(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		calls func(l *relistingListWatch)
		want  []string
	}{
		{"list", func(l *relistingListWatch) {
			_, _ = l.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "42"})
			_, _ = l.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "42"})
		}, []string{"list rv=", "list rv=42"}},
		{"watch-list", func(l *relistingListWatch) {
			w, _ := l.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "42", SendInitialEvents: ptr.To(true)})
			w.Stop()
			w, _ = l.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "42", SendInitialEvents: ptr.To(true)})
			w.Stop()
		}, []string{"watch rv= initial", "watch rv=42 initial"}},
		{"a plain watch is not a relist", func(l *relistingListWatch) {
			w, _ := l.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "42"})
			w.Stop()
			_, _ = l.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "42"})
		}, []string{"watch rv=42", "list rv="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &optionsRecorder{}
			l := newRelistingListWatch(rec)
			l.relist()
			tc.calls(l)
			if len(rec.calls) != len(tc.want) {
				t.Fatalf("calls %q, want %q", rec.calls, tc.want)
			}
			for i := range tc.want {
				if rec.calls[i] != tc.want[i] {
					t.Errorf("calls %q, want %q", rec.calls, tc.want)
					break
				}
			}
		})
	}
}

// TestCurrentComparesTheCacheWithAList: Current finds a synced cache the same as a list, and
// a cache that lost an object, or holds an older version of one, not.
func TestCurrentComparesTheCacheWithAList(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods := make([]runtime.Object, 0, 20)
	for i := range cap(pods) {
		pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: fmt.Sprintf("p-%d", i), ResourceVersion: "7"}})
	}
	client := fake.NewClientset(pods...)
	informer := NewRelistableInformer(cache.ToListerWatcherWithContext(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Pods("apps").List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.CoreV1().Pods("apps").Watch(ctx, o)
		},
	}, client)), &corev1.Pod{}, 0, cache.Indexers{})
	go informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("never synced")
	}
	if same, _, err := informer.Current(ctx); err != nil || !same {
		t.Fatalf("a synced cache: same = %v, %v", same, err)
	}
	store := informer.GetStore()
	old, _, _ := store.GetByKey("apps/p-3")
	stale := old.(*corev1.Pod).DeepCopy()
	stale.ResourceVersion = "6"
	if err := store.Update(stale); err != nil {
		t.Fatal(err)
	}
	if same, _, err := informer.Current(ctx); err != nil || same {
		t.Errorf("a cache holding an older version: same = %v, %v", same, err)
	}
	if err := store.Update(old); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(old); err != nil {
		t.Fatal(err)
	}
	if same, _, err := informer.Current(ctx); err != nil || same {
		t.Errorf("a cache missing an object: same = %v, %v", same, err)
	}
}
