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
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// watchedInformer is an informer the controllers read, named for logs.
type watchedInformer struct {
	name     string
	informer cache.SharedIndexInformer
}

// catchUpTimings are how awaitCaughtUp paces itself.
type catchUpTimings struct {
	// poll is how often the caches are looked at.
	poll time.Duration
	// natural is how long an informer may take to catch up by itself, with the events it
	// watches, before it is checked against a list or made to list again.
	natural time.Duration
	// again is how long after a check or a relist an informer still behind is checked again.
	again time.Duration
	// report is how often the informers still behind are logged.
	report time.Duration
}

var defaultCatchUpTimings = catchUpTimings{poll: 50 * time.Millisecond, natural: 500 * time.Millisecond, again: 5 * time.Second, report: 15 * time.Second}

// current is an informer that can check its cache against a consistent list
// (informercache.RelistableInformer.Current).
type current interface {
	Current(ctx context.Context) (same bool, listRV string, err error)
}

// relister is an informer that can be made to list again (informercache.RelistableInformer).
type relister interface {
	Relist()
}

// awaitCaughtUp returns once every informer's cache holds at least what the API server held at
// resource version rv, the Lease's at its acquisition, or with ctx's error when ctx ends first.
//
// HasSynced stays true across a broken watch, so it cannot tell: an informer that has not
// seen the API server since an outage answers from what it held before, and a leader acting
// on it would delete the entries another replica wrote meanwhile for pods it does not know.
// What does tell is the resource version the cache has processed (its store's last synced
// one; the reflector's when client-go's AtomicFIFO is off): events and lists arrive in
// resource version order, so a cache at rv or later holds every change made before the
// Lease was acquired. A busy informer gets there with its next event. A quiet one would get
// there only with the API server's next watch bookmark, about a minute later, so it is checked
// against a consistent list instead (informercache.RelistableInformer.Current): the same
// objects at the same resource versions as of rv or later prove it up to date. One that
// differs is made to list again, and checked again. An informer that can do neither waits for
// its events and bookmarks.
func awaitCaughtUp(ctx context.Context, informers []watchedInformer, rv string) error {
	return awaitCaughtUpWith(ctx, informers, rv, defaultCatchUpTimings)
}

func awaitCaughtUpWith(ctx context.Context, informers []watchedInformer, rv string, timings catchUpTimings) error {
	logger := klog.FromContext(ctx)
	start := time.Now()
	behind := slices.Clone(informers)
	attempted := map[string]time.Time{}
	var checked, relisted int
	lastReport := start
	ticker := time.NewTicker(timings.poll)
	defer ticker.Stop()
	for {
		behind = slices.DeleteFunc(behind, func(w watchedInformer) bool { return caughtUp(logger, w, rv) })
		if time.Since(start) >= timings.natural {
			behind = slices.DeleteFunc(behind, func(w watchedInformer) bool {
				if time.Since(attempted[w.name]) < timings.again {
					return false
				}
				attempted[w.name] = time.Now()
				if c, ok := w.informer.(current); ok {
					checked++
					same, listRV, err := c.Current(ctx)
					if err != nil {
						logger.V(2).Info("Could not check a cache against the API server", "informer", w.name, "err", err)
						return false
					}
					if same && atLeast(listRV, rv) {
						logger.V(2).Info("Cache found up to date", "informer", w.name, "at", lastSynced(w.informer), "listed", listRV, "want", rv)
						return true
					}
				}
				if r, ok := w.informer.(relister); ok {
					logger.V(2).Info("Listing again to catch up", "informer", w.name, "at", lastSynced(w.informer), "want", rv)
					relisted++
					r.Relist()
				}
				return false
			})
		}
		if len(behind) == 0 {
			logger.Info("Informer caches caught up with the lease's acquisition", "resourceVersion", rv, "duration", time.Since(start), "checked", checked, "relisted", relisted)
			return nil
		}
		if now := time.Now(); now.Sub(lastReport) >= timings.report {
			lastReport = now
			names := make([]string, 0, len(behind))
			for _, w := range behind {
				names = append(names, w.name+"@"+lastSynced(w.informer))
			}
			logger.Info("Waiting for informer caches to catch up before writing", "behind", names, "want", rv, "waited", now.Sub(start).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
	}
}

// lastSynced is the resource version the informer's cache has processed.
func lastSynced(informer cache.SharedIndexInformer) string {
	if rv := informer.GetStore().LastStoreSyncResourceVersion(); rv != "" {
		return rv
	}
	return informer.LastSyncResourceVersion()
}

// caughtUp reports whether the informer's cache is at rv or later. Resource versions that are
// not comparable (an API server on storage other than etcd may make them so) cannot prove
// anything: the informer is taken as caught up, with a warning.
func caughtUp(logger klog.Logger, w watchedInformer, rv string) bool {
	synced := lastSynced(w.informer)
	c, err := resourceversion.CompareResourceVersion(synced, rv)
	if err != nil {
		if synced == "" {
			return false
		}
		logger.Info("Warning: resource versions are not comparable; not waiting for this informer to catch up", "informer", w.name, "at", synced, "want", rv, "err", err)
		return true
	}
	return c >= 0
}

// atLeast reports whether resource version a is rv or later.
func atLeast(a, rv string) bool {
	c, err := resourceversion.CompareResourceVersion(a, rv)
	return err == nil && c >= 0
}
