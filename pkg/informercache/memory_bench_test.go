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
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/cache"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// benchPods is the size of the cache the benchmark fills: the largest cluster hack/bench
// measures by default (-n).
const benchPods = 30_000

// kwokPodProto is testdata/kwok-pod.json, a running Deployment pod as kwok and the API
// server keep it (status, managedFields of the ReplicaSet controller and of kwok, a
// last-applied annotation), in the protobuf encoding informers decode.
func kwokPodProto(b *testing.B) []byte {
	b.Helper()
	raw, err := os.ReadFile("testdata/kwok-pod.json")
	if err != nil {
		b.Fatal(err)
	}
	var pod corev1.Pod
	if err := json.Unmarshal(raw, &pod); err != nil {
		b.Fatal(err)
	}
	data, err := pod.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkPodCacheMemory fills an indexer, with the pod informer's and the PodLister's
// indexes, with 30k decoded pods through each transform, and reports the live heap per pod.
//
//	go test -run '^$' -bench BenchmarkPodCacheMemory -benchtime 1x ./pkg/informercache/
func BenchmarkPodCacheMemory(b *testing.B) {
	data := kwokPodProto(b)
	renderer, err := render.NewRenderer(render.Settings{TrustDomain: spiffeid.RequireTrustDomainFromString("example.org"), ClusterName: "c", ParentIDTemplate: config.DefaultParentIDTemplate})
	if err != nil {
		b.Fatal(err)
	}
	// The projections for spire-controller-manager's default ClusterSPIFFEID template and
	// parent ID template, as the standalone binary narrows to them, and for one that also
	// reads the pod's hostname, which a compact Pod does not keep.
	reachOf := func(template string) render.Reach {
		reach := renderer.Reach()
		reach.Union(render.CompileClusterSPIFFEID(&spirev1alpha1.ClusterSPIFFEID{Spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			SPIFFEIDTemplate: template,
		}}).Reach())
		return reach
	}
	projection := func(template string) cache.TransformFunc {
		p := NewPodProjection()
		p.relist = func() {}
		p.Narrow(func() render.Reach { return reachOf(template) })
		return p.Transform
	}

	for _, tc := range []struct {
		name      string
		transform cache.TransformFunc
	}{
		{"untransformed", func(obj any) (any, error) { return obj, nil }},
		// What an embedder's factories, or a pod informer that cannot list again, keep.
		{"allButManagedFields", Trim},
		{"projectedForHostnameTemplate", projection("spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/host/{{ .PodSpec.Hostname }}")},
		// What the standalone binary keeps.
		{"compactForDefaultTemplate", projection("spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				indexers := cache.Indexers{uidBucketIndex: indexByUIDBucket, nodeNameIndex: indexByNodeName,
					cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
				indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, indexers)
				before := heapInUse()
				for i := range benchPods {
					pod := &corev1.Pod{}
					if err := pod.Unmarshal(data); err != nil {
						b.Fatal(err)
					}
					// Pods of 300 ReplicaSets of 100 pods, with random UIDs as the API server gives.
					hash := fmt.Sprintf("%010x", i/100)
					pod.Name = fmt.Sprintf("bench-%s-%06d", hash, i)
					pod.Labels["pod-template-hash"] = hash
					pod.UID = uuid.NewUUID()
					obj, err := tc.transform(pod)
					if err != nil {
						b.Fatal(err)
					}
					if err := indexer.Add(obj); err != nil {
						b.Fatal(err)
					}
				}
				after := heapInUse()
				b.ReportMetric(float64(after-before)/benchPods, "B/pod")
				runtime.KeepAlive(indexer)
			}
		})
	}
}
