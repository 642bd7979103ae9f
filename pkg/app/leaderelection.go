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
	"os"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/uuid"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/config"
)

// inClusterNamespaceFile holds the pod's namespace when running in a cluster.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// runWithLeaderElection runs run while this process holds the Lease, so that of several
// replicas exactly one writes to SPIRE. It returns when ctx is done; if the lease is lost
// while ctx is still live it returns an error, and the caller should exit so that the
// process restarts as a standby with fresh caches.
func runWithLeaderElection(ctx context.Context, kubeClient clientset.Interface, le config.LeaderElection, health *Health, run func(context.Context)) error {
	logger := klog.FromContext(ctx)
	namespace := le.ResourceNamespace
	if namespace == "" {
		data, err := os.ReadFile(inClusterNamespaceFile)
		if err != nil {
			return fmt.Errorf("leaderElection.resourceNamespace is required when not running in a pod: %w", err)
		}
		namespace = strings.TrimSpace(string(data))
	}
	hostname, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("getting hostname for the leader election identity: %w", err)
	}
	// The hostname names the pod in logs; the UUID keeps two processes on one host distinct.
	identity := hostname + "_" + string(uuid.NewUUID())
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, le.ResourceName,
		kubeClient.CoreV1(), kubeClient.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity})
	if err != nil {
		return fmt.Errorf("creating the leader election lock: %w", err)
	}

	watchdog := leaderelection.NewLeaderHealthzAdaptor(le.LeaseDuration)
	health.leaseCheck = watchdog.Check
	health.electing.Store(true)
	lost := make(chan struct{})
	// The elector releases the Lease as soon as its context ends, and client-go allows that
	// only once everything the Lease guards has stopped. So the elector runs on a context of
	// its own, which ends when ctx has ended and run has returned: a standby that takes the
	// Lease over never writes beside the old leader's last writes.
	electorCtx, stopElector := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElector()
	var (
		mu      sync.Mutex
		stopped bool
		done    chan struct{}
	)
	// stopRun marks the run as over and waits for the leader's run, if any, to return.
	stopRun := func() {
		mu.Lock()
		stopped = true
		d := done
		mu.Unlock()
		if d != nil {
			<-d
		}
	}
	// The elector does not wait for OnStartedLeading to return, should it stop on its own
	// (the Lease lost); this does, so that the controllers have stopped before
	// runWithLeaderElection returns.
	defer stopRun()
	stopAfterRun := context.AfterFunc(ctx, func() {
		stopRun()
		stopElector()
	})
	defer stopAfterRun()
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        watchdog,
		Name:            le.ResourceName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leading context.Context) {
				logger.Info("Became leader", "lease", klog.KRef(namespace, le.ResourceName), "identity", identity)
				mu.Lock()
				if stopped {
					mu.Unlock()
					return
				}
				done = make(chan struct{})
				mu.Unlock()
				defer close(done)
				// The controllers stop when ctx ends or the leadership does.
				runCtx, cancel := context.WithCancel(leading)
				defer cancel()
				defer context.AfterFunc(ctx, cancel)()
				health.leading.Store(true)
				run(runCtx)
				logger.Info("Controllers stopped; releasing the lease", "lease", klog.KRef(namespace, le.ResourceName))
			},
			OnStoppedLeading: func() {
				health.leading.Store(false)
				if ctx.Err() == nil {
					close(lost)
				}
			},
			OnNewLeader: func(current string) {
				if current != identity {
					logger.Info("Standing by", "leader", current)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("configuring leader election: %w", err)
	}
	logger.Info("Waiting for the leader election lease", "lease", klog.KRef(namespace, le.ResourceName), "identity", identity)
	elector.Run(electorCtx)
	select {
	case <-lost:
		return fmt.Errorf("lost the leader election lease %s/%s", namespace, le.ResourceName)
	default:
		return nil
	}
}
