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
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
)

// ControllerManagerControllers are the kube-controller-manager controllers
// the full world runs, by the long names kube-controller-manager 1.37 knows
// (an unknown name stops it at start): what turns Deployments, ReplicaSets,
// Jobs, StatefulSets and Services into pods and EndpointSlices, deletes
// namespaces, collects garbage, and watches node health.
var ControllerManagerControllers = []string{
	"deployment-controller",
	"replicaset-controller",
	"job-controller",
	"statefulset-controller",
	"daemonset-controller",
	"cronjob-controller",
	"ttl-after-finished-controller",
	"endpointslice-controller",
	"endpoints-controller",
	"namespace-controller",
	"garbage-collector-controller",
	// Deletes the pods of deleted nodes.
	"pod-garbage-collector-controller",
	// Lifts the not-ready taint once kwok reports a node Ready.
	"node-lifecycle-controller",
	"taint-eviction-controller",
	// Every namespace gets its "default" service account, which the
	// ServiceAccount admission plugin gives each pod.
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	// The kube-root-ca.crt config map that service account token volumes project.
	"root-ca-certificate-publisher-controller",
}

const (
	controlPlaneReadyTimeout = 60 * time.Second
	controlPlaneStopGrace    = 10 * time.Second
	serviceAccountTimeout    = 60 * time.Second
)

// startScheduler starts kube-scheduler and waits for its /healthz.
func (k *Kube) startScheduler(ctx context.Context, bin string, extra []string) (err error) {
	k.scheduler, err = k.startComponent(ctx, KubeScheduler, bin, func(port int) []string {
		return append(k.componentArgs(KubeScheduler, port), extra...)
	})
	return err
}

// startControllerManager starts kube-controller-manager with
// ControllerManagerControllers and waits for its /healthz.
func (k *Kube) startControllerManager(ctx context.Context, bin string, extra []string) (err error) {
	pki := filepath.Join(k.dir, "pki")
	if err := k.writeRootCA(); err != nil {
		return err
	}
	k.controllerManager, err = k.startComponent(ctx, KubeControllerManager, bin, func(port int) []string {
		args := append(k.componentArgs(KubeControllerManager, port),
			"--controllers="+strings.Join(ControllerManagerControllers, ","),
			// The token controller signs service account tokens with the key
			// kube-apiserver verifies them with, and publishes the root CA.
			"--service-account-private-key-file="+filepath.Join(pki, "sa.key"),
			"--root-ca-file="+k.rootCAFile(),
		)
		return append(args, extra...)
	})
	return err
}

// componentArgs are the flags kube-scheduler and kube-controller-manager
// share: the admin kubeconfig for everything, secure serving of /healthz on
// a loopback port with a self-signed certificate, no leader election, and
// client rate limits high enough for rollouts of hundreds of pods.
func (k *Kube) componentArgs(name string, port int) []string {
	return []string{
		"--kubeconfig=" + k.kubeconfig,
		"--authentication-kubeconfig=" + k.kubeconfig,
		"--authorization-kubeconfig=" + k.kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(k.dir, name+"-certs"),
		"--leader-elect=false",
		"--kube-api-qps=200",
		"--kube-api-burst=400",
	}
}

// startComponent starts a control-plane component serving /healthz on a
// free port, retrying when it loses the port to another process.
func (k *Kube) startComponent(ctx context.Context, name, bin string, args func(port int) []string) (*process, error) {
	client := &http.Client{
		Timeout: 2 * time.Second,
		// The component serves a certificate it signed itself.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
	defer client.CloseIdleConnections()
	var (
		proc  *process
		port  int
		start time.Time
	)
	err := startOnFreePorts(name, func() (*process, error) {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		port = ports[0]
		proc = newProcess(name, bin, filepath.Join(k.dir, name+".log"), args(port)...)
		k.logf.printf("realcluster: starting %s on 127.0.0.1:%d", name, port)
		start = time.Now()
		return proc, proc.start()
	}, func() error {
		return waitHTTPReady(ctx, proc, controlPlaneReadyTimeout, client, "https://127.0.0.1:"+strconv.Itoa(port)+"/healthz")
	})
	if err != nil {
		return nil, err
	}
	k.logf.printf("realcluster: %s healthy in %s", name, time.Since(start).Round(time.Millisecond))
	return proc, nil
}

func (k *Kube) rootCAFile() string { return filepath.Join(k.dir, "pki", "ca.crt") }

// writeRootCA writes the CA that signed kube-apiserver's serving
// certificate, without the serving certificate itself, for --root-ca-file.
func (k *Kube) writeRootCA() error {
	certs, err := certutil.ParseCertsPEM(k.ca())
	if err != nil {
		return fmt.Errorf("parse kube-apiserver certificates: %w", err)
	}
	var out []byte
	for _, c := range certs {
		if c.IsCA {
			out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
		}
	}
	if len(out) == 0 {
		return fmt.Errorf("no CA among kube-apiserver's %d certificates", len(certs))
	}
	if err := os.WriteFile(k.rootCAFile(), out, 0o644); err != nil {
		return fmt.Errorf("write root CA: %w", err)
	}
	return nil
}

// WaitServiceAccount waits until the service account exists, e.g. the
// "default" one the serviceaccount controller creates in each new namespace
// of the full world; pods that name it are refused until then.
func WaitServiceAccount(ctx context.Context, c kubernetes.Interface, namespace, name string) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, readyPollInterval, serviceAccountTimeout, true, func(ctx context.Context) (bool, error) {
		_, last = c.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
		if last != nil && !apierrors.IsNotFound(last) {
			return false, nil
		}
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("wait for service account %s/%s (last: %v): %w", namespace, name, last, err)
	}
	return nil
}
