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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/app"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

var (
	gotSVIDLine = regexp.MustCompile(`"Got spire-registrar's X509-SVID from the SPIRE agent".*serial="?(\d+)"?.*expiresAt="([^"]+)"`)
	rotatedLine = regexp.MustCompile(`"Rotated spire-registrar's X509-SVID".*serial="?(\d+)"?.*notBefore="([^"]+)".*expiresAt="([^"]+)"`)
)

// klogTime parses a time.Time as klog's text format prints it.
func klogTime(t *testing.T, s string) time.Time {
	t.Helper()
	parsed, err := time.Parse("2006-01-02 15:04:05 -0700 MST", s)
	if err != nil {
		t.Fatalf("time %q in the log: %v", s, err)
	}
	return parsed
}

// podSPIFFEID is the ID the test's ClusterSPIFFEID gives a pod of namespace default.
func podSPIFFEID(name string) string { return "spiffe://" + trustDomain + "/ns/default/pod/" + name }

// TestStandaloneOverMTLS runs the standalone topology end to end on real binaries; the steps
// share one world and run in order.
func TestStandaloneOverMTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real kube-apiserver, spire-server and spire-agent")
	}
	w := newWorld(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	node, err := realcluster.CreateNode(ctx, w.stack.Client, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		Spec:       spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/pod/{{ .PodMeta.Name }}"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPodAndWait := func(t *testing.T, name string) time.Duration {
		t.Helper()
		start := time.Now()
		if _, err := realcluster.CreatePod(ctx, w.stack.Client, "default", name, node.Name); err != nil {
			t.Fatal(err)
		}
		return waitForEntry(ctx, t, w.stack.SPIRE, podSPIFFEID(name), true, start)
	}

	t.Run("registers pods over TCP", func(t *testing.T) {
		r := w.registrar
		var svidAfter, readyAfter time.Duration
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			if svidAfter == 0 && len(logMatches(r, gotSVIDLine)) > 0 {
				svidAfter = time.Since(r.Started())
			}
			if r.Ready() {
				readyAfter = time.Since(r.Started())
				return true, nil
			}
			return false, nil
		}); err != nil {
			t.Fatalf("spire-registrar not ready over mTLS within 2 minutes: %v", err)
		}
		t.Logf("connect time: process start → admin X509-SVID from the agent %s → ready (first full SPIRE list over mTLS succeeded) %s",
			svidAfter.Round(time.Millisecond), readyAfter.Round(time.Millisecond))
		if svidAfter == 0 {
			t.Errorf("ready without logging the X509-SVID from the agent: not over mTLS?")
		}
		took := createPodAndWait(t, "web")
		t.Logf("pod created → entry in SPIRE over TCP: %s", took.Round(time.Millisecond))
		if n := w.proxy.connections(); n == 0 {
			t.Errorf("no connection went through the TCP address spire-registrar was given")
		}
		// Without entryIDPrefix the full resync before ready owned every undeclared entry;
		// it kept the admin entry of spire-registrar's own SPIFFE ID, or SPIRE would have
		// refused the pod's entry above.
		entries, err := w.stack.SPIRE.EntryShow(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(entries, func(e realcluster.Entry) bool { return e.SPIFFEID == registrarID }) {
			t.Errorf("the full resync deleted spire-registrar's own admin entry %s", registrarID)
		}
	})

	t.Run("refuses a workload without an admin entry", func(t *testing.T) {
		// This test process gets an X509-SVID of its own from the same agent, for an entry
		// that is not admin.
		const plainID = "spiffe://" + trustDomain + "/not-admin"
		if _, err := w.agent.CreateWorkloadEntryCLI(ctx, plainID, []string{"unix:uid:" + w.uid, "unix:path:" + w.testExe}); err != nil {
			t.Fatal(err)
		}
		waitForSVID(ctx, t, w.agent, plainID, true)
		serverID := spiffeid.RequireFromString("spiffe://" + trustDomain + "/spire/server")

		client := dialWithSVID(ctx, t, w.agent, w.stack.SPIRE.Address(), plainID, serverID)
		_, err := client.ListEntries(ctx)
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("ListEntries with a non-admin X509-SVID: %v, want PermissionDenied", err)
		}
		t.Logf("refused access, as the server says it: %v", err)

		// The control: the same process, agent and server, with an SVID whose entry differs
		// only in being admin, lists entries, and mints the admission webhook's serving
		// certificate as spire-registrar does over this connection.
		const adminID = "spiffe://" + trustDomain + "/test-admin"
		if _, err := w.agent.CreateWorkloadEntryCLI(ctx, adminID, []string{"unix:uid:" + w.uid, "unix:path:" + w.testExe}, "-admin"); err != nil {
			t.Fatal(err)
		}
		waitForSVID(ctx, t, w.agent, adminID, true)
		admin := dialWithSVID(ctx, t, w.agent, w.stack.SPIRE.Address(), adminID, serverID)
		if _, err := admin.ListEntries(ctx); err != nil {
			t.Fatalf("ListEntries with an admin X509-SVID: %v", err)
		}
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		const webhookDNSName = "spire-registrar-webhook.spire-system.svc"
		minted, err := admin.Authority().MintX509SVID(ctx, key, &url.URL{Scheme: "spiffe", Host: trustDomain, Path: "/spire-registrar-webhook"},
			[]string{webhookDNSName}, time.Hour)
		if err != nil {
			t.Fatalf("minting the webhook's certificate over mTLS: %v", err)
		}
		if got := minted.Chain[0].DNSNames; !slices.Equal(got, []string{webhookDNSName}) {
			t.Errorf("minted certificate for %v, want %s", got, webhookDNSName)
		}

		// And the other way round: the client refuses a server that does not present the
		// configured ID, before sending anything.
		impostor := dialWithSVID(ctx, t, w.agent, w.stack.SPIRE.Address(), plainID, spiffeid.RequireFromString("spiffe://"+trustDomain+"/not-the-server"))
		shortCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err = impostor.ListEntries(shortCtx)
		if err == nil || !strings.Contains(err.Error(), "unexpected ID") {
			t.Fatalf("ListEntries from a server with another SPIFFE ID: %v, want the handshake refused for an unexpected ID", err)
		}
		t.Logf("server refused by the client: %v", err)
	})

	t.Run("SVID rotation does not interrupt reconciling", func(t *testing.T) {
		r := w.registrar
		first := logMatches(r, gotSVIDLine)
		if len(first) == 0 {
			t.Fatal("no initial X509-SVID in the log")
		}
		firstExpiry := klogTime(t, first[0][2])
		var rotation []string
		var seen time.Duration
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*registrarSVIDTTL, true, func(context.Context) (bool, error) {
			if m := logMatches(r, rotatedLine); len(m) > 0 {
				rotation, seen = m[0], time.Since(r.Started())
				return true, nil
			}
			return false, nil
		}); err != nil {
			t.Fatalf("no SVID rotation logged within %s: %v", 2*registrarSVIDTTL, err)
		}
		if rotation[1] == first[0][1] {
			t.Fatalf("the rotated SVID has the serial of the first, %s", rotation[1])
		}
		// SPIRE backdates NotBefore, so an SVID's issue time is its expiry minus the TTL.
		rotatedExpiry := klogTime(t, rotation[3])
		firstIssued, rotatedIssued := firstExpiry.Add(-registrarSVIDTTL), rotatedExpiry.Add(-registrarSVIDTTL)
		t.Logf("rotation: first SVID serial %s issued %s, expiring %s; rotated SVID serial %s issued %s, %s into the first's %s life (%s before it expired), expiring %s; spire-registrar logged it %s after its start",
			first[0][1], firstIssued.Format(time.TimeOnly), firstExpiry.Format(time.TimeOnly), rotation[1], rotatedIssued.Format(time.TimeOnly),
			rotatedIssued.Sub(firstIssued), registrarSVIDTTL, firstExpiry.Sub(rotatedIssued), rotatedExpiry.Format(time.TimeOnly), seen.Round(100*time.Millisecond))
		if !rotatedIssued.Before(firstExpiry) || !rotatedExpiry.After(firstExpiry) {
			t.Errorf("rotated SVID issued %s expiring %s: want it before the first's expiry %s and lasting past it", rotatedIssued, rotatedExpiry, firstExpiry)
		}
		took := createPodAndWait(t, "after-rotation")
		t.Logf("pod created after the rotation → entry: %s", took.Round(time.Millisecond))

		// The open connection was authenticated with the first SVID. Once that has expired,
		// cut it: spire-registrar must dial again and can only succeed with the rotated one.
		if wait := time.Until(firstExpiry.Add(time.Second)); wait > 0 {
			t.Logf("waiting %s for the first SVID to expire", wait.Round(time.Second))
			time.Sleep(wait)
		}
		before := w.proxy.connections()
		w.proxy.dropAll()
		took = createPodAndWait(t, "after-expiry")
		t.Logf("first SVID expired and the connection cut: pod created → entry %s, over %d new connection(s)",
			took.Round(time.Millisecond), w.proxy.connections()-before)
		if w.proxy.connections() == before {
			t.Errorf("no new connection after the cut: the entry did not come through a new handshake")
		}
	})

	t.Run("the agent issues the X509-SVID of a ClusterStaticEntry until it is deleted", func(t *testing.T) {
		const localID = "spiffe://" + trustDomain + "/local-process"
		created := time.Now()
		if _, err := w.stack.SpireAPI.SpireV1alpha1().ClusterStaticEntries().Create(ctx, &spirev1alpha1.ClusterStaticEntry{
			ObjectMeta: metav1.ObjectMeta{Name: "local-process"},
			Spec: spirev1alpha1.ClusterStaticEntrySpec{SPIFFEID: localID, ParentID: w.agent.ID(),
				Selectors: []string{"unix:uid:" + w.uid, "unix:path:" + w.testExe}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		inSPIRE := waitForEntry(ctx, t, w.stack.SPIRE, localID, true, created)
		svid := waitForSVID(ctx, t, w.agent, localID, true)
		issued := time.Since(created)
		t.Logf("ClusterStaticEntry created → entry in SPIRE %s → X509-SVID issued by the agent %s",
			inSPIRE.Round(time.Millisecond), issued.Round(time.Millisecond))

		// A real X509-SVID: it verifies against the server's own trust bundle, read through the
		// server's CLI rather than from the agent.
		pem, err := w.stack.SPIRE.CLI(ctx, "bundle show")
		if err != nil {
			t.Fatal(err)
		}
		bundle, err := x509bundle.Parse(spiffeid.RequireTrustDomainFromString(trustDomain), pem)
		if err != nil {
			t.Fatal(err)
		}
		id, chains, err := x509svid.Verify(svid.Certificates, bundle)
		if err != nil {
			t.Fatalf("the issued X509-SVID does not verify against the server's bundle: %v", err)
		}
		if id.String() != localID {
			t.Errorf("verified SPIFFE ID %s, want %s", id, localID)
		}
		leaf := svid.Certificates[0]
		t.Logf("X509-SVID %s: serial %s, valid %s to %s, chain of %d verified to the server's CA %q",
			id, leaf.SerialNumber, leaf.NotBefore.Format(time.TimeOnly), leaf.NotAfter.Format(time.TimeOnly), len(chains[0]), chains[0][len(chains[0])-1].Subject)

		deleted := time.Now()
		if err := w.stack.SpireAPI.SpireV1alpha1().ClusterStaticEntries().Delete(ctx, "local-process", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		goneFromSPIRE := waitForEntry(ctx, t, w.stack.SPIRE, localID, false, deleted)
		waitForSVID(ctx, t, w.agent, localID, false)
		// The agent's sync interval backs off from sync_interval to at most 5 s while nothing
		// changes for it, so a change reaches it within about 5 s.
		t.Logf("ClusterStaticEntry deleted → entry gone from SPIRE %s → agent stops issuing the X509-SVID %s (agent sync_interval %s, backing off to 5s)",
			goneFromSPIRE.Round(time.Millisecond), time.Since(deleted).Round(time.Millisecond), realcluster.DefaultAgentSyncInterval)
	})
}

// svidsOf fetches this process's X509-SVIDs from the agent; none is not an error.
func svidsOf(ctx context.Context, agent *realcluster.Agent) ([]*x509svid.SVID, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	svids, err := workloadapi.FetchX509SVIDs(ctx, workloadapi.WithAddr(agent.WorkloadAPIAddress()))
	if status.Code(err) == codes.PermissionDenied {
		return nil, nil // "no identity issued"
	}
	return svids, err
}

// waitForSVID waits until the agent issues (want) or no longer issues (!want) an X509-SVID
// with the SPIFFE ID to this process, and returns it when wanted.
func waitForSVID(ctx context.Context, t *testing.T, agent *realcluster.Agent, spiffeID string, want bool) *x509svid.SVID {
	t.Helper()
	var found *x509svid.SVID
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		svids, err := svidsOf(ctx, agent)
		if err != nil {
			last = err
			return false, nil
		}
		i := slices.IndexFunc(svids, func(s *x509svid.SVID) bool { return s.ID.String() == spiffeID })
		if i >= 0 {
			found = svids[i]
		}
		return (i >= 0) == want, nil
	})
	if err != nil {
		t.Fatalf("X509-SVID %s issued=%v: not within a minute (last error: %v)", spiffeID, want, last)
	}
	return found
}

// dialWithSVID dials the SPIRE server's TCP API at serverAddress as spire-registrar does, but presenting this
// process's X509-SVID for spiffeID and authorizing serverID.
func dialWithSVID(ctx context.Context, t *testing.T, agent *realcluster.Agent, serverAddress, spiffeID string, serverID spiffeid.ID) *spire.Client {
	t.Helper()
	pick := func(svids []*x509svid.SVID) *x509svid.SVID {
		if i := slices.IndexFunc(svids, func(s *x509svid.SVID) bool { return s.ID.String() == spiffeID }); i >= 0 {
			return svids[i]
		}
		return svids[0]
	}
	source, err := app.NewX509Source(ctx, agent.WorkloadAPIAddress(), 30*time.Second, workloadapi.WithDefaultX509SVIDPicker(pick))
	if err != nil {
		t.Fatal(err)
	}
	if svid, err := source.GetX509SVID(); err != nil || svid.ID.String() != spiffeID {
		source.Close()
		t.Fatalf("source picked %v (%v), want %s", svid, err, spiffeID)
	}
	tlsConfig := tlsconfig.MTLSClientConfig(source, source, tlsconfig.AuthorizeID(serverID))
	client, err := spire.DialTCP(ctx, serverAddress, credentials.NewTLS(tlsConfig), source.Close)
	if err != nil {
		source.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}
