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

package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// statusConfigMap is where the example controller writes its pod counts.
const statusConfigMap = "example-manager-pod-counts"

// podCountController stands for "a controller of the team's own": it keeps a ConfigMap with
// the number of pods per namespace, from the pod informer it shares with spire-registrar.
type podCountController struct {
	client    clientset.Interface
	pods      corelisters.PodLister
	synced    cache.InformerSynced
	namespace string
	queue     workqueue.TypedRateLimitingInterface[string]
}

func newPodCountController(pods coreinformers.PodInformer, client clientset.Interface, namespace string) (*podCountController, error) {
	c := &podCountController{
		client: client, pods: pods.Lister(), synced: pods.Informer().HasSynced, namespace: namespace,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "example_pod_counts"}),
	}
	// Every pod event recounts; one key, so bursts collapse into one write.
	enqueue := func(any) { c.queue.Add(statusConfigMap) }
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, DeleteFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Run counts pods until ctx is done.
func (c *podCountController) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced) {
		return
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		for c.processNext(ctx) {
		}
	}, time.Second)
	<-ctx.Done()
}

func (c *podCountController) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "Counting pods")
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

func (c *podCountController) sync(ctx context.Context) error {
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return err
	}
	counts := map[string]string{}
	perNamespace := map[string]int{}
	for _, pod := range pods {
		perNamespace[pod.Namespace]++
	}
	for ns, n := range perNamespace {
		counts[ns] = strconv.Itoa(n)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: statusConfigMap, Namespace: c.namespace}, Data: counts}
	_, err = c.client.CoreV1().ConfigMaps(c.namespace).Update(ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = c.client.CoreV1().ConfigMaps(c.namespace).Create(ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("writing %s/%s: %w", c.namespace, statusConfigMap, err)
	}
	return nil
}
