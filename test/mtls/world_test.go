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

package mtls

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const (
	trustDomain = realcluster.DefaultTrustDomain
	// registrarID is the SPIFFE ID of spire-registrar's admin entry.
	registrarID = "spiffe://" + trustDomain + "/spire-registrar"
	// registrarSVIDTTL is the admin entry's X509-SVID lifetime: short, so that the agent
	// rotates it (at about half of it) while the test runs.
	registrarSVIDTTL = 30 * time.Second
)

// world is a kube-apiserver, a spire-server, a spire-agent attested to it with a join token,
// and the spire-registrar binary reaching the server's TCP API through a proxy the test can
// cut, with an admin X509-SVID from the agent.
type world struct {
	stack *realcluster.Stack
	agent *realcluster.Agent
	proxy *tcpProxy
	// testExe is this test binary, which the agent tells apart from spire-registrar by its
	// unix:path selector.
	testExe string
	uid     string

	registrar *realcluster.Registrar
}

// TestMain runs the tests and removes the spire-registrar binary they built.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := realcluster.RemoveRegistrarBinary(); err != nil {
		log.Printf("remove the spire-registrar binary: %v", err)
	}
	os.Exit(code)
}

func newWorld(t *testing.T) *world {
	t.Helper()
	bin := realcluster.RegistrarBinary(t)
	stack := realcluster.NewStack(t)
	agent := realcluster.NewAgent(t, realcluster.AgentOptions{Server: stack.SPIRE, DiscoverWorkloadPath: true})
	testExe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if testExe, err = filepath.EvalSymlinks(testExe); err != nil {
		t.Fatal(err)
	}
	w := &world{stack: stack, agent: agent, proxy: newTCPProxy(t, stack.SPIRE.Address()), testExe: testExe, uid: strconv.Itoa(os.Getuid())}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// The controller's admin entry: its uid and its executable, parented to the agent.
	if _, err := agent.CreateWorkloadEntryCLI(ctx, registrarID, []string{"unix:uid:" + w.uid, "unix:path:" + bin},
		"-admin", "-x509SVIDTTL", strconv.Itoa(int(registrarSVIDTTL/time.Second))); err != nil {
		t.Fatal(err)
	}
	if err := agent.WaitForSVIDCached(ctx, registrarID); err != nil {
		t.Fatal(err)
	}
	// No entryIDPrefix: every undeclared entry is spire-registrar's, yet the first full resync
	// must keep its own admin entry, or SPIRE refuses it from then on. The long gcInterval
	// makes that first resync the only one, so the undeclared entries the steps create by
	// the CLI stay while they are used.
	config := fmt.Sprintf("apiVersion: spire.spiffe.io/v1alpha1\nkind: ControllerManagerConfig\ntrustDomain: %s\nclusterName: it\nclusterDomain: cluster.local\n"+
		"gcInterval: 1h\nspireServerAddress: %s\nworkloadAPISocketPath: %s\n", trustDomain, w.proxy.Addr(), agent.SocketPath())
	w.registrar = realcluster.NewRegistrar(t, realcluster.RegistrarOptions{Binary: bin, Kubeconfig: stack.Kube.Kubeconfig(), Config: config})
	return w
}

// logMatches returns the submatches of re in r's log lines so far, in order.
func logMatches(r *realcluster.Registrar, re *regexp.Regexp) [][]string {
	return re.FindAllStringSubmatch(r.Logs(), -1)
}

// waitForEntry waits until SPIRE, read through its own CLI, holds (want) or no longer holds
// (!want) an entry with the SPIFFE ID, and returns how long that took from since.
func waitForEntry(ctx context.Context, t *testing.T, spire *realcluster.SPIRE, spiffeID string, want bool, since time.Time) time.Duration {
	t.Helper()
	var took time.Duration
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		entries, err := spire.EntryShow(ctx)
		if err != nil {
			return false, nil
		}
		has := slices.ContainsFunc(entries, func(e realcluster.Entry) bool { return e.SPIFFEID == spiffeID })
		took = time.Since(since)
		return has == want, nil
	})
	if err != nil {
		t.Fatalf("SPIRE entry %s present=%v: not within a minute: %v", spiffeID, want, err)
	}
	return took
}
