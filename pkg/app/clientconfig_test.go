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
	"net/http"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/ktesting"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestBuiltInKindsAreReadAsProtobuf: a real kube-apiserver answers the built-in kinds'
// client in protobuf, and the config it was made from is left as it was, for the
// spire.spiffe.io client, whose custom resources only speak JSON.
func TestBuiltInKindsAreReadAsProtobuf(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver")
	}
	_, ctx := ktesting.NewTestContext(t)
	kube := realcluster.NewKube(t, realcluster.KubeOptions{})
	base := kube.RESTConfig()
	cfg := builtInKindsConfig(base)
	if base.ContentType != "" || base.AcceptContentTypes != "" {
		t.Fatalf("the given config was changed: ContentType %q, AcceptContentTypes %q", base.ContentType, base.AcceptContentTypes)
	}
	var mu sync.Mutex
	var answered []string
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err == nil {
				mu.Lock()
				answered = append(answered, resp.Header.Get("Content-Type"))
				mu.Unlock()
			}
			return resp, err
		})
	})
	client, err := clientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(answered) != 2 || answered[0] != runtime.ContentTypeProtobuf || answered[1] != runtime.ContentTypeProtobuf {
		t.Errorf("the API server answered in %q, want %s twice", answered, runtime.ContentTypeProtobuf)
	}
}
