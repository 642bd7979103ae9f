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
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
)

// Stack is what most end-to-end tests start from: a real kube-apiserver with our CRDs
// applied, a real spire-server, and clients for both kinds of Kubernetes API.
type Stack struct {
	Kube     *Kube
	SPIRE    *SPIRE
	Client   kubernetes.Interface
	SpireAPI spireclientset.Interface
}

// StackOptions configures NewStackWith.
type StackOptions struct {
	Kube  KubeOptions
	SPIRE SPIREOptions
	// SCMCRDs installs spire-controller-manager v0.7.0's own CRDs (see
	// SCMCRDsDir) instead of ours, as a cluster set up by the official Helm
	// chart has them.
	SCMCRDs bool
}

// NewStack starts a Stack for a test; everything stops when the test ends.
func NewStack(t testing.TB) *Stack {
	t.Helper()
	return NewStackWith(t, StackOptions{})
}

// NewStackWith is NewStack with options; everything stops when the test ends.
func NewStackWith(t testing.TB, opts StackOptions) *Stack {
	t.Helper()
	kube := NewKube(t, opts.Kube)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	dir, err := CRDsDir()
	if opts.SCMCRDs {
		dir, err = SCMCRDsDir(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ApplyCRDs(ctx, kube.RESTConfig(), dir); err != nil {
		t.Fatal(err)
	}
	client, err := kube.Client()
	if err != nil {
		t.Fatal(err)
	}
	spireAPI, err := spireclientset.NewForConfig(kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return &Stack{Kube: kube, SPIRE: NewSPIRE(t, opts.SPIRE), Client: client, SpireAPI: spireAPI}
}
