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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/cache"
)

// benchPods is the size of the cache the benchmark fills: the largest cluster hack/bench
// measures by default (-n).
const benchPods = 30_000

// podProto is a pod of testdata, in the protobuf encoding informers decode: kwok-pod.json is
// the pod hack/bench creates, a one-container pod as kwok and the API server keep it (status,
// managedFields of the ReplicaSet controller and of kwok, a last-applied annotation);
// deployment-pod.json a realistic Deployment pod, with an app and a sidecar container, env,
// ports, probes, resources, three volumes, affinity and the status of two running containers.
func podProto(b *testing.B, file string) []byte {
	b.Helper()
	raw, err := os.ReadFile(file)
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
// indexes, with 30k decoded pods, whole and trimmed, and reports the live heap per pod.
//
//	go test -run '^$' -bench BenchmarkPodCacheMemory -benchtime 1x ./pkg/informercache/
func BenchmarkPodCacheMemory(b *testing.B) {
	for _, pod := range []struct{ name, file string }{
		{"kwok", "testdata/kwok-pod.json"},
		{"deployment", "testdata/deployment-pod.json"},
	} {
		data := podProto(b, pod.file)
		for _, tc := range []struct {
			name      string
			transform func() cache.TransformFunc
		}{
			{"whole", func() cache.TransformFunc { return func(obj any) (any, error) { return obj, nil } }},
			{"trimmed", NewTrim},
		} {
			b.Run(pod.name+"/"+tc.name, func(b *testing.B) {
				for range b.N {
					transform := tc.transform()
					indexers := cache.Indexers{uidBucketIndex: indexByUIDBucket, nodeNameIndex: indexByNodeName,
						cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
					indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, indexers)
					before := heapInUse()
					for i := range benchPods {
						pod := &corev1.Pod{}
						if err := pod.Unmarshal(data); err != nil {
							b.Fatal(err)
						}
						// Pods of 300 ReplicaSets of 100 pods, with random UIDs as the API server
						// gives, on 100 nodes.
						hash := fmt.Sprintf("%010x", i/100)
						pod.Name = fmt.Sprintf("bench-%s-%06d", hash, i)
						pod.Labels["pod-template-hash"] = hash
						pod.UID = uuid.NewUUID()
						pod.Spec.NodeName = fmt.Sprintf("node-%d", i%100)
						obj, err := transform(pod)
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
}
