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
	"errors"
	"testing"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/spire-registrar/spire-registrar/pkg/metrics"
)

func TestWholePodsGet(t *testing.T) {
	whole := richPod("web-1", map[string]string{"app": "web"})
	cached := trimPod(t, NewTrim(), whole.DeepCopy())
	client := k8sfake.NewClientset(whole.DeepCopy())
	var asked []string
	client.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		asked = append(asked, a.(k8stesting.GetActionImpl).Name)
		return false, nil, nil
	})
	pods := NewWholePods(client.CoreV1())
	count := func(result string) float64 {
		var m dto.Metric
		if err := metrics.WholePodReads.WithLabelValues(result).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	found, notFound, failed := count("found"), count("not_found"), count("error")

	got, ok, err := pods.Get(context.Background(), cached)
	if err != nil || !ok || len(got.Spec.Containers) != 1 || got.Spec.Containers[0].Image != "nginx" || got.ManagedFields != nil {
		t.Errorf("Get = %+v, %v, %v; want the whole pod without managedFields", got, ok, err)
	}
	if len(asked) != 1 || asked[0] != "web-1" || count("found") != found+1 {
		t.Errorf("asked the API server for %v, found counted %v times; want one GET", asked, count("found")-found)
	}

	// Another pod of the same name: the cached one is gone.
	other := cached.DeepCopy()
	other.UID = "other"
	if _, ok, err := pods.Get(context.Background(), other); ok || err != nil {
		t.Errorf("Get of a pod replaced by another of its name = %v, %v; want gone", ok, err)
	}
	if err := client.CoreV1().Pods("shop").Delete(context.Background(), "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := pods.Get(context.Background(), cached); ok || err != nil || count("not_found") != notFound+1 {
		t.Errorf("Get of a deleted pod = %v, %v; want gone, counted as not_found", ok, err)
	}

	client.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	if _, _, err := pods.Get(context.Background(), cached); err == nil || count("error") != failed+1 {
		t.Errorf("Get when the API server fails = %v; want the error, counted", err)
	}
	if _, _, err := NewWholePods(nil).Get(context.Background(), &corev1.Pod{}); err == nil {
		t.Error("Get without a client succeeded")
	}
}
