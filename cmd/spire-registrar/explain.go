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
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	"github.com/spire-registrar/spire-registrar/pkg/app"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/explain"
)

// pluginName is the name kubectl runs the binary by for "kubectl spire-registrar": kubectl
// finds plugins on PATH as kubectl-<name>, with the name's dashes written as underscores.
const pluginName = "kubectl-spire_registrar"

const explainUsage = `Usage:
  spire-registrar explain pod NAMESPACE/NAME [flags]
  spire-registrar explain clusterspiffeid NAME [flags]
  spire-registrar explain podcertificate NAMESPACE/NAME [-volume VOLUME] [flags]
  spire-registrar explain podcertificaterequest NAMESPACE/NAME [flags]
  kubectl spire-registrar explain ...   (the binary on PATH as kubectl-spire_registrar)

Explains, with the controller's config, why a pod has (or has no) identity, what a
ClusterSPIFFEID does across its pods, or why a pod's podCertificate volume (or a
PodCertificateRequest) was issued, denied or is waiting, with which SPIFFE ID and
ClusterSPIFFEID. It only reads: the cluster through the kubeconfig, SPIRE
through the config's spireServerSocketPath.

Flags:
`

// explainArgs returns the arguments of the explain command when the binary is asked for it:
// as "spire-registrar explain ..." or as the kubectl plugin. plugin reports the plugin name,
// under which explain is the only command.
func explainArgs(argv []string) (args []string, plugin, ok bool) {
	if filepath.Base(argv[0]) == pluginName {
		if len(argv) > 1 && argv[1] == "explain" {
			return argv[2:], true, true
		}
		return nil, true, true
	}
	if len(argv) > 1 && argv[1] == "explain" {
		return argv[2:], false, true
	}
	return nil, false, false
}

// explainOptions are the explain command's flags: the controller's own for the config, the
// cluster and SPIRE, so that it sees what the controller sees, and the output's.
type explainOptions struct {
	kubeconfig, kubeContext, master string
	configFile                      string
	expandEnv                       bool
	spireAPISocket                  string
	spireServerSocketPath           string
	output                          string
	limit                           int
	volume                          string
}

func (o *explainOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.configFile, "config", "", "Path to the controller's config file. Required.")
	fs.BoolVar(&o.expandEnv, "expand-env", false, "Expand environment variables in the config file, as the controller does with it.")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig (default: $KUBECONFIG, ~/.kube/config, or in-cluster).")
	fs.StringVar(&o.kubeContext, "context", "", "The kubeconfig context to use.")
	fs.StringVar(&o.master, "master", "", "The address of the Kubernetes API server. Overrides any value in kubeconfig.")
	fs.StringVar(&o.spireAPISocket, "spire-api-socket", "", "As for the controller: the SPIRE API socket when the config does not set spireServerSocketPath (deprecated).")
	fs.StringVar(&o.spireServerSocketPath, "spire-server-socket-path", "", "Reach SPIRE at this socket instead of the config's spireServerSocketPath.")
	fs.StringVar(&o.output, "o", "text", "Output format: text or json.")
	fs.StringVar(&o.output, "output", "text", "Output format: text or json.")
	fs.IntVar(&o.limit, "limit", explain.DefaultFailureLimit, "clusterspiffeid: how many failing pods to list.")
	fs.StringVar(&o.volume, "volume", "", "podcertificate: explain only this volume's podCertificate projections.")
}

// parseInterspersed parses flags placed anywhere among the positional arguments, as kubectl
// users write them, and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// runExplain runs the explain command and returns the process's exit code.
func runExplain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var opts explainOptions
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, explainUsage)
		fs.PrintDefaults()
	}
	opts.addFlags(fs)
	positional, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	if len(positional) != 2 || !slices.Contains([]string{"pod", "clusterspiffeid", "podcertificate", "podcertificaterequest"}, positional[0]) {
		fmt.Fprintf(stderr, "error: want \"pod NAMESPACE/NAME\", \"clusterspiffeid NAME\", \"podcertificate NAMESPACE/NAME\" or \"podcertificaterequest NAMESPACE/NAME\", got %q\n\n", strings.Join(positional, " "))
		fs.Usage()
		return 2
	}
	if err := explainCommand(ctx, &opts, positional[0], positional[1], stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	return 0
}

// warnConfigFields tells the user, as the controller logs it at start, of the config fields
// that were ignored as unknown and those set more than once.
func warnConfigFields(stderr io.Writer, cfg *config.Config) {
	for _, u := range cfg.Unknown {
		fmt.Fprintf(stderr, "warning: ignoring unknown config field %s\n", u)
	}
	for _, field := range cfg.Duplicates {
		fmt.Fprintf(stderr, "warning: config field %s is set more than once; the last value is used\n", field)
	}
}

// explainCommand gathers, explains and prints one object.
func explainCommand(ctx context.Context, opts *explainOptions, kind, target string, stdout, stderr io.Writer) error {
	if opts.output != "text" && opts.output != "json" {
		return fmt.Errorf("-o must be text or json, got %q", opts.output)
	}
	if opts.configFile == "" {
		return errors.New("--config is required: explain renders with the controller's config")
	}
	cfg, err := config.Load(opts.configFile, opts.expandEnv)
	if err != nil {
		return err
	}
	warnConfigFields(stderr, cfg)
	cfg.UseSPIREAPISocketFlag(opts.spireAPISocket)
	if opts.spireServerSocketPath != "" {
		cfg.SPIREServerSocketPath = opts.spireServerSocketPath
	}
	if cfg.ClusterDomain == "" {
		// As the controller does; outside a pod this fails and names needing it are left out.
		detectCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if domain, err := app.DetectClusterDomain(detectCtx); err == nil {
			cfg.ClusterDomain = domain
		} else {
			fmt.Fprintf(stderr, "warning: clusterDomain is not set and could not be detected (%v); DNS names that need it are left out, as the controller would\n", err)
		}
		cancel()
	}
	x, err := explain.New(cfg)
	if err != nil {
		return err
	}

	// As kubectl loads it, so that the plugin talks to the cluster kubectl does.
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = opts.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: opts.kubeContext, ClusterInfo: clientcmdapi.Cluster{Server: opts.master}}
	restConfig, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return fmt.Errorf("building Kubernetes client config: %w", err)
	}
	restConfig.UserAgent = "spire-registrar-explain"
	kube, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("creating Kubernetes client: %w", err)
	}
	spireAPI, err := spireclientset.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("creating spire.spiffe.io client: %w", err)
	}
	spireClient, err := app.DialSPIRE(ctx, cfg)
	if err != nil {
		return err
	}
	defer spireClient.Close()
	source := &explain.Source{Kube: kube, SpireAPI: spireAPI, SPIRE: spireClient}

	switch kind {
	case "pod":
		namespace, name, ok := strings.Cut(target, "/")
		if !ok || namespace == "" || name == "" {
			return fmt.Errorf("want the pod as NAMESPACE/NAME, got %q", target)
		}
		in, err := source.PodInput(ctx, namespace, name)
		if err != nil {
			return err
		}
		p := x.Pod(in)
		if opts.output == "json" {
			return explain.WriteJSON(stdout, p)
		}
		return explain.WritePodText(stdout, p)
	case "podcertificate", "podcertificaterequest":
		namespace, name, ok := strings.Cut(target, "/")
		if !ok || namespace == "" || name == "" {
			return fmt.Errorf("want the %s as NAMESPACE/NAME, got %q", kind, target)
		}
		var answers []*explain.PodCertificate
		if kind == "podcertificaterequest" {
			req, in, err := source.PodCertificateRequest(ctx, namespace, name)
			if err != nil {
				return err
			}
			answers = append(answers, x.PodCertificateRequest(in, req))
		} else {
			in, err := source.PodCertificateInput(ctx, namespace, name)
			if err != nil {
				return err
			}
			if answers, err = x.PodCertificates(in, opts.volume); err != nil {
				return err
			}
		}
		if opts.output == "json" {
			return explain.WriteJSON(stdout, answers)
		}
		return explain.WritePodCertificatesText(stdout, answers)
	default:
		in, err := source.ClusterSPIFFEIDInput(ctx, cfg, target)
		if err != nil {
			return err
		}
		c := x.ClusterSPIFFEID(in, opts.limit)
		if opts.output == "json" {
			return explain.WriteJSON(stdout, c)
		}
		return explain.WriteClusterSPIFFEIDText(stdout, c)
	}
}
