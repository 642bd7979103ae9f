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
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// RelistableInformer is a shared informer that can be made to list every object again, without
// a new informer or a new cache: the objects stay readable, and event handlers see the relist
// as updates of what changed. Leadership uses it to learn when a cache has caught up with the
// API server after an outage (see pkg/app).
type RelistableInformer struct {
	cache.SharedIndexInformer
	lw *relistingListWatch
}

// NewRelistableInformer returns a shared index informer of lw's objects that Relist can make
// list again.
func NewRelistableInformer(lw cache.ListerWatcherWithContext, obj runtime.Object, resync time.Duration, indexers cache.Indexers) *RelistableInformer {
	rlw := newRelistingListWatch(lw)
	return &RelistableInformer{SharedIndexInformer: cache.NewSharedIndexInformer(rlw, obj, resync, indexers), lw: rlw}
}

// Relist ends the informer's open watch as the API server ends one whose resource version
// it no longer serves, so that the reflector lists every object again and records the list's
// resource version as its last synced one. With no watch open, the next one ends so. The list
// is a consistent read: its resource version is the API server's current one, even for a kind
// that has not changed for long.
func (i *RelistableInformer) Relist() {
	i.lw.relist()
}

// currentPageSize is how many objects Current reads a page: what a reflector lists a page.
const currentPageSize = 500

// Current reports whether the informer's cache holds what the API server holds now, and the
// resource version of that now: a consistent list, read page by page as the informer lists
// (its namespace, selectors and conversion), finds exactly the cached objects, each at the
// resource version cached. It proves a quiet informer up to date without listing it into the
// cache again, whose reflector would first wait out its backoff; a cache that differs may
// only be behind, or ahead, and is worth asking again. It keeps only the keys and resource
// versions of one page at a time besides the cache.
func (i *RelistableInformer) Current(ctx context.Context) (bool, string, error) {
	store := i.GetStore()
	seen := 0
	listRV := ""
	options := metav1.ListOptions{Limit: currentPageSize}
	for {
		page, err := i.lw.ListerWatcherWithContext.ListWithContext(ctx, options)
		if err != nil {
			return false, "", err
		}
		list, err := meta.ListAccessor(page)
		if err != nil {
			return false, "", err
		}
		if listRV == "" {
			listRV = list.GetResourceVersion()
		}
		same := true
		if err := meta.EachListItem(page, func(obj runtime.Object) error {
			item, err := meta.Accessor(obj)
			if err != nil {
				return err
			}
			seen++
			key := item.GetName()
			if ns := item.GetNamespace(); ns != "" {
				key = ns + "/" + key
			}
			cached, ok, err := store.GetByKey(key)
			if err != nil || !ok {
				same = false
				return nil
			}
			if c, err := meta.Accessor(cached); err != nil || c.GetResourceVersion() != item.GetResourceVersion() {
				same = false
			}
			return nil
		}); err != nil {
			return false, "", err
		}
		if !same {
			return false, listRV, nil
		}
		if list.GetContinue() == "" {
			break
		}
		// The continue token pins the snapshot: every page is read at the first's resource
		// version.
		options = metav1.ListOptions{Limit: currentPageSize, Continue: list.GetContinue()}
	}
	return seen == len(store.ListKeys()), listRV, nil
}

// relistingListWatch is a ListerWatcher whose informer can be made to list again: relist
// ends the open watch with the error the API server sends when a watch's resource version
// is too old, on which a reflector lists and replaces its whole cache. Each listed object
// then goes through the informer's transform again.
type relistingListWatch struct {
	cache.ListerWatcherWithContext

	mu      sync.Mutex
	watches map[*expiringWatch]struct{}
	// pending makes the next watch expire at once: relist was called while none was open.
	pending bool
	// fresh makes the next list, or watch-list stream, read the API server's current state
	// (resource version "", a consistent read) rather than anything as recent as the last
	// synced resource version, which the API server may serve from a watch cache that, for a
	// quiet kind, has not moved since that kind's last change. It is cleared once such a read
	// started.
	fresh bool
}

func newRelistingListWatch(lw cache.ListerWatcherWithContext) *relistingListWatch {
	return &relistingListWatch{ListerWatcherWithContext: lw, watches: map[*expiringWatch]struct{}{}}
}

// IsWatchListSemanticsUnSupported passes on whether the client can stream the initial list
// (see watchlist.DoesClientNotSupportWatchListSemantics).
func (l *relistingListWatch) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(l.ListerWatcherWithContext)
}

// List is cache.ListerWatcher's list, for informers that take one; reflectors call
// ListWithContext.
func (l *relistingListWatch) List(options metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), options)
}

// Watch is cache.ListerWatcher's watch, for informers that take one; reflectors call
// WatchWithContext.
func (l *relistingListWatch) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), options)
}

// ListWithContext lists, as a consistent read after relist.
func (l *relistingListWatch) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	l.mu.Lock()
	fresh := l.fresh
	l.mu.Unlock()
	if fresh {
		options.ResourceVersion, options.ResourceVersionMatch = "", ""
	}
	list, err := l.ListerWatcherWithContext.ListWithContext(ctx, options)
	if err != nil {
		return nil, err
	}
	// A list is the relist asked for: the watch after it need not end.
	l.mu.Lock()
	l.fresh, l.pending = false, false
	l.mu.Unlock()
	return list, nil
}

// WatchWithContext opens a watch that relist can end. A watch that streams the initial list
// (a watch-list) is itself a relist: as a consistent read after relist, and never ended by a
// pending relist.
func (l *relistingListWatch) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	initial := options.SendInitialEvents != nil && *options.SendInitialEvents
	l.mu.Lock()
	fresh := l.fresh
	l.mu.Unlock()
	if initial && fresh {
		options.ResourceVersion = ""
	}
	w, err := l.ListerWatcherWithContext.WatchWithContext(ctx, options)
	if err != nil {
		return nil, err
	}
	ew := &expiringWatch{inner: w, out: make(chan watch.Event), expire: make(chan struct{}), done: make(chan struct{})}
	l.mu.Lock()
	l.watches[ew] = struct{}{}
	switch {
	case initial:
		l.fresh, l.pending = false, false
	case l.pending:
		l.pending = false
		ew.expireOnce.Do(func() { close(ew.expire) })
	}
	l.mu.Unlock()
	go func() {
		ew.forward()
		l.mu.Lock()
		delete(l.watches, ew)
		l.mu.Unlock()
	}()
	return ew, nil
}

// relist ends the open watches with an expiry, or the next one if none is open.
func (l *relistingListWatch) relist() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fresh = true
	if len(l.watches) == 0 {
		l.pending = true
		return
	}
	for w := range l.watches {
		w.expireOnce.Do(func() { close(w.expire) })
	}
}

// expiringWatch forwards a watch's events until it is stopped or told to expire.
type expiringWatch struct {
	inner      watch.Interface
	out        chan watch.Event
	expire     chan struct{}
	expireOnce sync.Once
	done       chan struct{}
	stopOnce   sync.Once
}

// expired is the event that ends a watch whose resource version the API server no longer
// serves.
func expired() watch.Event {
	return watch.Event{Type: watch.Error, Object: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired,
		Message: "listed again on request (spire-registrar)",
	}}
}

func (w *expiringWatch) forward() {
	defer close(w.out)
	defer w.inner.Stop()
	in := w.inner.ResultChan()
	for {
		select {
		case <-w.done:
			return
		case <-w.expire:
			select {
			case w.out <- expired():
			case <-w.done:
			}
			return
		case e, ok := <-in:
			if !ok {
				return
			}
			select {
			case w.out <- e:
			case <-w.done:
				return
			}
		}
	}
}

// Stop ends the watch.
func (w *expiringWatch) Stop() {
	w.stopOnce.Do(func() { close(w.done) })
}

// ResultChan returns the watch's events.
func (w *expiringWatch) ResultChan() <-chan watch.Event {
	return w.out
}
