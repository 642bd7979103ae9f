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

// Command spire-registrar keeps a SPIRE server's registration entries and federation
// relationships equal to what the cluster's ClusterSPIFFEID, ClusterStaticEntry and
// ClusterFederatedTrustDomain resources declare, or, in static mode, what manifest files do.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	// The JSON log format of logEncoding: json, registered as kube components do.
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/app"
)

func main() {
	if args, plugin, ok := explainArgs(os.Args); ok {
		if plugin && args == nil {
			fmt.Fprintf(os.Stderr, "error: as %s only \"explain\" is available, e.g. kubectl spire-registrar explain pod NAMESPACE/NAME --config FILE\n", pluginName)
			os.Exit(2)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := runExplain(ctx, args, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	klog.InitFlags(nil)
	var opts app.Options
	opts.AddFlags(flag.CommandLine)
	flag.Parse()
	opts.Parsed(flag.CommandLine)
	if opts.ShowVersion {
		fmt.Println(app.Version())
		return
	}

	if err := app.RunStandalone(signalContext(), &opts, flag.CommandLine); err != nil {
		klog.ErrorS(err, "spire-registrar failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}

// signalContext returns a context cancelled by the first SIGINT or SIGTERM, so the controller
// shuts down cleanly; a second signal exits at once.
func signalContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		klog.Info("Shutting down; send the signal again to exit immediately")
		cancel()
		<-signals
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}()
	return ctx
}
