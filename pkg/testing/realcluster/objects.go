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

package realcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// PlaceholderImage is the image of pods made by CreatePod. Nothing ever pulls
// it: no kubelet runs.
const PlaceholderImage = "registry.invalid/placeholder:latest"

// EnsureNamespace creates the namespace if it does not exist yet.
func EnsureNamespace(ctx context.Context, c kubernetes.Interface, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// EnsureServiceAccount creates the service account if it does not exist yet
// and returns it as stored, with its UID. The light world needs it for pods
// that name a service account: no controller creates "default" there.
func EnsureServiceAccount(ctx context.Context, c kubernetes.Interface, namespace, name string) (*corev1.ServiceAccount, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	created, err := c.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = c.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("ensure service account %s/%s: %w", namespace, name, err)
	}
	return created, nil
}

// CreateNode creates a Node object directly (no kubelet runs to register
// one). mutate functions may adjust it before creation, e.g. to add labels.
func CreateNode(ctx context.Context, c kubernetes.Interface, name string, mutate ...func(*corev1.Node)) (*corev1.Node, error) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{corev1.LabelHostname: name},
		},
	}
	for _, m := range mutate {
		m(node)
	}
	created, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create node %s: %w", name, err)
	}
	return created, nil
}

// CreatePod creates a pod already bound to nodeName (no scheduler runs) with
// one placeholder container and service account "default" set explicitly,
// because the ServiceAccount admission plugin that would default it is
// disabled. The pod never runs; its status stays Pending until changed with
// UpdatePodStatus or SetPodPhase. mutate functions may adjust the pod before
// creation, e.g. to add labels or change the service account.
func CreatePod(ctx context.Context, c kubernetes.Interface, namespace, name, nodeName string, mutate ...func(*corev1.Pod)) (*corev1.Pod, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{
			NodeName:           nodeName,
			ServiceAccountName: "default",
			Containers:         []corev1.Container{{Name: "main", Image: PlaceholderImage}},
		},
	}
	for _, m := range mutate {
		m(pod)
	}
	created, err := c.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create pod %s/%s: %w", namespace, name, err)
	}
	return created, nil
}

// UpdatePodStatus applies mutate to the pod's latest status and writes it
// through the status subresource, retrying on conflicts.
func UpdatePodStatus(ctx context.Context, c kubernetes.Interface, namespace, name string, mutate func(*corev1.PodStatus)) (*corev1.Pod, error) {
	var updated *corev1.Pod
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := c.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(&pod.Status)
		updated, err = c.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update status of pod %s/%s: %w", namespace, name, err)
	}
	return updated, nil
}

// SetPodPhase sets the pod's status.phase, e.g. to Running, Succeeded or Failed.
func SetPodPhase(ctx context.Context, c kubernetes.Interface, namespace, name string, phase corev1.PodPhase) (*corev1.Pod, error) {
	return UpdatePodStatus(ctx, c, namespace, name, func(s *corev1.PodStatus) { s.Phase = phase })
}
