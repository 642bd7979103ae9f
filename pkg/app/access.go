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
	"fmt"

	"k8s.io/klog/v2"

	authorizationv1 "k8s.io/api/authorization/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
)

// AdaptToPermissions sets cc.ReadEndpoints and cc.EventsOnlyLogged from what cc.KubeClient
// may do, with a warning for each, so that RBAC granting what spire-controller-manager needs
// (the official chart's) is enough. A check that fails leaves the default, reading
// EndpointSlices and writing Events.
func AdaptToPermissions(ctx context.Context, cc *ControllerContext) {
	logger := klog.FromContext(ctx)
	if cc.Config.Reconcile.ClusterSPIFFEIDs {
		namespace, _ := namespaceScope(cc.Config.CacheNamespaces)
		readable, err := canReadEndpointSlices(ctx, cc.KubeClient, namespace)
		if err != nil {
			logger.Info("Warning: could not check access to EndpointSlices; reading them", "err", err)
		} else if !readable {
			logger.Info("Warning: may not list and watch EndpointSlices; reading v1 Endpoints for Service DNS names instead, as spire-controller-manager does. Grant endpointslices get, list and watch to read the slices")
			cc.ReadEndpoints = true
		}
	}
	writable, err := canWriteEvents(ctx, cc.KubeClient)
	if err != nil {
		logger.Info("Warning: could not check access to Events; writing them", "err", err)
	} else if !writable {
		logger.Info("Warning: may not create Events in the default namespace, where those about cluster-scoped resources go; they are only logged. Grant events create and patch there to see them with kubectl")
		cc.EventsOnlyLogged = true
	}
}

// canReadEndpointSlices reports whether the credentials may list and watch EndpointSlices in
// namespace ("" for all). The official SPIRE Helm chart grants spire-controller-manager's
// ServiceAccount v1 Endpoints only, so a swapped image may not read them.
func canReadEndpointSlices(ctx context.Context, kube clientset.Interface, namespace string) (bool, error) {
	return allowed(ctx, kube, "EndpointSlices may be read",
		authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "list", Group: discoveryv1.GroupName, Resource: "endpointslices"},
		authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "watch", Group: discoveryv1.GroupName, Resource: "endpointslices"})
}

// canWriteEvents reports whether the credentials may create and patch Events about
// cluster-scoped resources, which live in the default namespace. The official SPIRE Helm chart
// grants Events only in the SPIRE server's namespace.
func canWriteEvents(ctx context.Context, kube clientset.Interface) (bool, error) {
	return allowed(ctx, kube, "Events may be written",
		authorizationv1.ResourceAttributes{Namespace: metav1.NamespaceDefault, Verb: "create", Resource: "events"},
		authorizationv1.ResourceAttributes{Namespace: metav1.NamespaceDefault, Verb: "patch", Resource: "events"})
}

// allowed asks the API server, with SelfSubjectAccessReviews, whether every one of attrs is
// allowed to the credentials.
func allowed(ctx context.Context, kube clientset.Interface, what string, attrs ...authorizationv1.ResourceAttributes) (bool, error) {
	for _, a := range attrs {
		review, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("asking whether %s: %w", what, err)
		}
		if !review.Status.Allowed {
			return false, nil
		}
	}
	return true, nil
}
