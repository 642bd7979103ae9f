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
	"net"
	"strings"
)

// kubernetesService is the API server's Service name, which cluster DNS resolves in every
// cluster; its canonical name ends with the cluster domain.
const kubernetesService = "kubernetes.default.svc"

// DetectClusterDomain finds the cluster domain (e.g. cluster.local) from cluster DNS, as
// spire-controller-manager does when clusterDomain is not configured. It only works in a pod.
func DetectClusterDomain(ctx context.Context) (string, error) {
	return detectClusterDomain(ctx, net.DefaultResolver.LookupCNAME)
}

func detectClusterDomain(ctx context.Context, lookupCNAME func(context.Context, string) (string, error)) (string, error) {
	cname, err := lookupCNAME(ctx, kubernetesService)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", kubernetesService, err)
	}
	domain := strings.TrimSuffix(strings.TrimPrefix(cname, kubernetesService+"."), ".")
	if domain == "" || domain == strings.TrimSuffix(cname, ".") {
		return "", fmt.Errorf("%s resolves to %q, which does not name a cluster domain", kubernetesService, cname)
	}
	return domain, nil
}
