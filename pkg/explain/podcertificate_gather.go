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

package explain

import (
	"context"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodCertificateInput reads a pod's input and the PodCertificateRequests of its namespace
// that name it.
func (s *Source) PodCertificateInput(ctx context.Context, namespace, name string) (PodCertificateInput, error) {
	in, err := s.PodInput(ctx, namespace, name)
	if err != nil {
		return PodCertificateInput{}, err
	}
	list, err := s.Kube.CertificatesV1().PodCertificateRequests(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return PodCertificateInput{}, fmt.Errorf("listing the PodCertificateRequests of %s: %w", namespace, err)
	}
	out := PodCertificateInput{PodInput: in}
	for i := range list.Items {
		if r := &list.Items[i]; r.Spec.PodUID == in.Pod.UID {
			out.Requests = append(out.Requests, r)
		}
	}
	return out, nil
}

// PodCertificateRequest reads a request and the input of the pod it names.
func (s *Source) PodCertificateRequest(ctx context.Context, namespace, name string) (*certificatesv1.PodCertificateRequest, PodCertificateInput, error) {
	req, err := s.Kube.CertificatesV1().PodCertificateRequests(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, PodCertificateInput{}, fmt.Errorf("getting PodCertificateRequest %s/%s: %w", namespace, name, err)
	}
	if _, err := s.Kube.CoreV1().Pods(namespace).Get(ctx, req.Spec.PodName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: req.Spec.PodName, UID: req.Spec.PodUID}}
		return req, PodCertificateInput{PodInput: PodInput{Pod: pod}, PodGone: true}, nil
	}
	in, err := s.PodCertificateInput(ctx, namespace, req.Spec.PodName)
	if err != nil {
		return nil, PodCertificateInput{}, err
	}
	return req, in, nil
}
