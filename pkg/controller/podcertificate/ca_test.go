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

package podcertificate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spire-registrar/spire-registrar/pkg/controller/runner"
	"github.com/spire-registrar/spire-registrar/pkg/podcert"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/spire/spiretest"
)

// TestStart: start-up fails, naming the fix, when SPIRE refuses to sign a downstream CA for
// the controller; when SPIRE merely does not answer, it goes on without a CA and the resyncs
// keep asking.
func TestStart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spire   func(*spiretest.Server)
		wantErr error // nil: Start succeeds
		wantCA  bool
	}{
		{name: "SPIRE signs", wantCA: true},
		{name: "not downstream", spire: func(s *spiretest.Server) { s.DenyDownstream(true) }, wantErr: spire.ErrNotDownstream},
		{name: "SPIRE unavailable", spire: func(s *spiretest.Server) { s.FailNext(spiretest.MethodNewDownstreamX509CA, 1, codes.Unavailable) }},
		{name: "SPIRE down", spire: func(s *spiretest.Server) { s.Stop() }},
		{name: "SPIRE fails otherwise", spire: func(s *spiretest.Server) { s.FailNext(spiretest.MethodNewDownstreamX509CA, 1, codes.Internal) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, envOptions{noStart: true, beforeStart: tc.spire})
			err := env.c.Start(env.ctx)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("Start = %v, want nil", err)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("Start = %v, want an error wrapping %v", err, tc.wantErr)
			}
			if got := env.currentCA() != nil; got != tc.wantCA {
				t.Errorf("holds a CA: %v, want %v", got, tc.wantCA)
			}
		})
	}
}

// TestSyncRequestWaitsForCA: without a usable CA a request is left for the parking (its error
// wraps runner.ErrWaitForProbe) and nothing is written; once a resync gets a CA, the probe
// passes and the request issues.
func TestSyncRequestWaitsForCA(t *testing.T) {
	env := newTestEnv(t, envOptions{beforeStart: func(s *spiretest.Server) {
		s.FailNext(spiretest.MethodNewDownstreamX509CA, 1, codes.Unavailable)
	}})
	cl := newCluster()
	env.add(t, cl.objects()...)
	key := newP256Key(t)
	req := kubeletRequest(t, cl.pod, cl.node, key)
	env.add(t, req)

	err := env.sync(req)
	if !errors.Is(err, runner.ErrWaitForProbe) {
		t.Fatalf("syncRequest without a CA = %v, want an error wrapping runner.ErrWaitForProbe", err)
	}
	if !strings.Contains(err.Error(), "Unavailable") {
		t.Errorf("syncRequest = %q, want it to say why there is no CA (SPIRE's Unavailable)", err)
	}
	if w := env.writes(); len(w) != 0 {
		t.Errorf("wrote %v without a CA", w)
	}
	if err := env.c.ca.probe(env.ctx); err == nil {
		t.Error("the parking's probe passes without a CA")
	}

	if err := env.c.resync(env.ctx); err != nil {
		t.Fatalf("resync: %v", err)
	}
	if err := env.c.ca.probe(env.ctx); err != nil {
		t.Fatalf("the parking's probe fails after the resync got a CA: %v", err)
	}
	if err := env.sync(req); err != nil {
		t.Fatalf("syncRequest with a CA: %v", err)
	}
	checkIssued(t, env, req, key, "spiffe://example.org/ns/prod/sa/web-sa", []string{"web.prod.svc"})
}

// TestSyncRequestNeverIssuesWithAShortCA: a CA that expires in under an hour cannot sign a
// certificate kube-apiserver accepts; the request waits for a renewed one.
func TestSyncRequestNeverIssuesWithAShortCA(t *testing.T) {
	env := newTestEnv(t, envOptions{beforeStart: func(s *spiretest.Server) { s.SetCATTL(59 * time.Minute) }})
	if env.currentCA() == nil {
		t.Fatal("Start got no CA")
	}
	cl := newCluster()
	env.add(t, cl.objects()...)
	req := kubeletRequest(t, cl.pod, cl.node, newP256Key(t))
	env.add(t, req)
	if err := env.sync(req); !errors.Is(err, runner.ErrWaitForProbe) {
		t.Fatalf("syncRequest with a CA of 59 minutes = %v, want an error wrapping runner.ErrWaitForProbe", err)
	}
	if w := env.writes(); len(w) != 0 {
		t.Errorf("wrote %v with a CA too short to sign", w)
	}
}

// TestSyncRequestFailsAfterFailPendingAfter: a request that has waited FailPendingAfter for
// a usable CA is Failed, with SPIREUnavailable when SPIRE gave no CA and CAExpired when the
// CA it gave is too short; a younger one keeps waiting.
func TestSyncRequestFailsAfterFailPendingAfter(t *testing.T) {
	const failPendingAfter = 10 * time.Minute
	for _, tc := range []struct {
		name       string
		spire      func(*spiretest.Server)
		age        time.Duration
		wantReason podcert.Reason // "": waits
		wantMsg    []string
	}{
		{
			name:       "SPIRE unavailable, older than FailPendingAfter",
			spire:      func(s *spiretest.Server) { s.FailNext(spiretest.MethodNewDownstreamX509CA, 1, codes.Unavailable) },
			age:        failPendingAfter + time.Second,
			wantReason: podcert.ReasonSPIREUnavailable, wantMsg: []string{"10m0s", "Unavailable"},
		},
		{
			name:  "SPIRE unavailable, younger than FailPendingAfter",
			spire: func(s *spiretest.Server) { s.FailNext(spiretest.MethodNewDownstreamX509CA, 1, codes.Unavailable) },
			age:   failPendingAfter - time.Minute,
		},
		{
			name:       "the CA is too short, older than FailPendingAfter",
			spire:      func(s *spiretest.Server) { s.SetCATTL(30 * time.Minute) },
			age:        failPendingAfter + time.Second,
			wantReason: podcert.ReasonCAExpired, wantMsg: []string{"10m0s", "expires"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, envOptions{beforeStart: tc.spire, options: func(o *Options) { o.FailPendingAfter = failPendingAfter }})
			cl := newCluster()
			env.add(t, cl.objects()...)
			req := kubeletRequest(t, cl.pod, cl.node, newP256Key(t))
			req.CreationTimestamp = metav1.NewTime(time.Now().Add(-tc.age))
			env.add(t, req)

			err := env.sync(req)
			if tc.wantReason == "" {
				if !errors.Is(err, runner.ErrWaitForProbe) {
					t.Fatalf("syncRequest = %v, want an error wrapping runner.ErrWaitForProbe", err)
				}
				if w := env.writes(); len(w) != 0 {
					t.Errorf("wrote %v", w)
				}
				return
			}
			if err != nil {
				t.Fatalf("syncRequest: %v", err)
			}
			cond := condition(t, env.request(t, req))
			if cond.Type != certificatesv1.PodCertificateRequestConditionTypeFailed || cond.Reason != string(tc.wantReason) {
				t.Errorf("condition %s reason %s (%q), want Failed reason %s", cond.Type, cond.Reason, cond.Message, tc.wantReason)
			}
			for _, m := range tc.wantMsg {
				if !strings.Contains(cond.Message, m) {
					t.Errorf("message %q does not say %q", cond.Message, m)
				}
			}
		})
	}
}

// TestWaitingRequestIsRetriedWhenFailPendingAfterRunsOut: the parking queues a waiting
// request again only once the CA is usable, so the controller itself must come back to it
// when FailPendingAfter runs out, or an outage would keep it pending for ever.
func TestWaitingRequestIsRetriedWhenFailPendingAfterRunsOut(t *testing.T) {
	const failPendingAfter = time.Minute
	env := newTestEnv(t, envOptions{noStart: true, options: func(o *Options) { o.FailPendingAfter = failPendingAfter }})
	cl := newCluster()
	env.add(t, cl.objects()...)
	req := kubeletRequest(t, cl.pod, cl.node, newP256Key(t))
	req.CreationTimestamp = metav1.NewTime(time.Now().Add(-failPendingAfter + 500*time.Millisecond))
	env.add(t, req)

	if err := env.sync(req); !errors.Is(err, runner.ErrWaitForProbe) {
		t.Fatalf("syncRequest = %v, want an error wrapping runner.ErrWaitForProbe", err)
	}
	got := make(chan string, 1)
	go func() {
		key, _ := env.c.queue.Get()
		got <- key
	}()
	select {
	case key := <-got:
		if want := req.Namespace + "/" + req.Name; key != want {
			t.Fatalf("queued %q, want %q", key, want)
		}
		env.c.queue.Done(key)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting request was not queued again when FailPendingAfter ran out")
	}
	if err := env.sync(req); err != nil {
		t.Fatalf("syncRequest: %v", err)
	}
	if cond := condition(t, env.request(t, req)); cond.Reason != string(podcert.ReasonSPIREUnavailable) {
		t.Errorf("reason %s, want %s", cond.Reason, podcert.ReasonSPIREUnavailable)
	}
}

// TestRenewIfDue: the CA is renewed at half its life and not before; with a CA that SPIRE
// makes shorter than two hours, also once it can no longer sign a certificate of an hour,
// unless it never could.
func TestRenewIfDue(t *testing.T) {
	for _, tc := range []struct {
		name  string
		caTTL time.Duration
		// at is when renewIfDue runs, from the CA.
		at        func(ca *spire.DownstreamCA) time.Time
		wantRenew bool
	}{
		{name: "a second before half life", caTTL: 4 * time.Hour,
			at: func(ca *spire.DownstreamCA) time.Time { return ca.RenewAt().Add(-time.Second) }},
		{name: "at half life", caTTL: 4 * time.Hour, wantRenew: true,
			at: func(ca *spire.DownstreamCA) time.Time { return ca.RenewAt() }},
		{name: "past half life", caTTL: 4 * time.Hour, wantRenew: true,
			at: func(ca *spire.DownstreamCA) time.Time { return ca.RenewAt().Add(time.Hour) }},
		{name: "just issued", caTTL: 4 * time.Hour,
			at: func(ca *spire.DownstreamCA) time.Time { return ca.Chain[0].NotBefore }},
		{name: "a short CA that still covers an hour", caTTL: 90 * time.Minute,
			at: func(ca *spire.DownstreamCA) time.Time { return ca.NotAfter().Add(-time.Hour) }},
		{name: "a short CA that no longer covers an hour, before half life", caTTL: 90 * time.Minute, wantRenew: true,
			at: func(ca *spire.DownstreamCA) time.Time { return ca.NotAfter().Add(-time.Hour + time.Second) }},
		// SPIRE capped it below an hour: asking again would get the same expiry until half life.
		{name: "a CA that never covered an hour, before half life", caTTL: 40 * time.Minute,
			at: func(ca *spire.DownstreamCA) time.Time { return ca.RenewAt().Add(-time.Second) }},
		{name: "a CA that never covered an hour, at half life", caTTL: 40 * time.Minute, wantRenew: true,
			at: func(ca *spire.DownstreamCA) time.Time { return ca.RenewAt() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, envOptions{beforeStart: func(s *spiretest.Server) { s.SetCATTL(tc.caTTL) }})
			old := env.currentCA()
			if old == nil {
				t.Fatal("Start got no CA")
			}
			authorities, err := env.authority.BundleX509Authorities(env.ctx)
			if err != nil {
				t.Fatal(err)
			}
			calls := env.spire.Calls(spiretest.MethodNewDownstreamX509CA)
			if err := env.c.ca.renewIfDue(env.ctx, tc.at(old), authorities); err != nil {
				t.Fatalf("renewIfDue: %v", err)
			}
			renewed := env.currentCA() != old
			if renewed != tc.wantRenew {
				t.Errorf("renewed: %v, want %v", renewed, tc.wantRenew)
			}
			if n := env.spire.Calls(spiretest.MethodNewDownstreamX509CA) - calls; (n == 1) != tc.wantRenew || n > 1 {
				t.Errorf("asked SPIRE for %d CAs, want renewal %v", n, tc.wantRenew)
			}
		})
	}
}

// TestRenewIfDueTaintedAuthority: a CA that chains to a tainted authority is renewed at once,
// so that pods move off that authority as agents' SVIDs do; a rotation alone renews nothing.
func TestRenewIfDueTaintedAuthority(t *testing.T) {
	env := newTestEnv(t, envOptions{})
	old := env.currentCA()
	oldRoot := env.spire.X509Authorities()[0]
	if old.Chain[len(old.Chain)-1].CheckSignatureFrom(oldRoot) != nil {
		t.Fatal("the first CA does not chain to the first root")
	}
	env.spire.RotateX509Authority()
	renewIfDue := func() {
		t.Helper()
		authorities, err := env.authority.BundleX509Authorities(env.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := env.c.ca.renewIfDue(env.ctx, time.Now(), authorities); err != nil {
			t.Fatalf("renewIfDue: %v", err)
		}
	}

	renewIfDue()
	if env.currentCA() != old {
		t.Fatal("a rotation renewed the CA before the old authority was tainted")
	}

	env.spire.TaintX509Authority(oldRoot)
	renewIfDue()
	renewed := env.currentCA()
	if renewed == old {
		t.Fatal("the CA that chains to a tainted authority was not renewed")
	}
	newRoot := env.spire.X509Authorities()[1]
	if renewed.Chain[len(renewed.Chain)-1].CheckSignatureFrom(newRoot) != nil {
		t.Error("the renewed CA does not chain to the new root")
	}

	renewIfDue()
	if env.currentCA() != renewed {
		t.Error("the CA was renewed again although it chains to an untainted authority")
	}
}

// TestRenewalFailureKeepsTheOldCA: when a renewal fails, the old CA signs on for as long as
// it covers an hour, and not after.
func TestRenewalFailureKeepsTheOldCA(t *testing.T) {
	env := newTestEnv(t, envOptions{beforeStart: func(s *spiretest.Server) { s.SetCATTL(4 * time.Hour) }})
	old := env.currentCA()
	authorities, err := env.authority.BundleX509Authorities(env.ctx)
	if err != nil {
		t.Fatal(err)
	}
	env.spire.FailNext(spiretest.MethodNewDownstreamX509CA, 1, codes.Unavailable)
	if err := env.c.ca.renewIfDue(env.ctx, old.RenewAt(), authorities); err == nil {
		t.Fatal("renewIfDue succeeded although SPIRE failed")
	}
	if env.currentCA() != old {
		t.Fatal("a failed renewal dropped the CA")
	}
	for _, tc := range []struct {
		name   string
		at     time.Time
		usable bool
	}{
		{"now", time.Now(), true},
		{"at half life", old.RenewAt(), true},
		{"an hour before it expires", old.NotAfter().Add(-time.Hour), true},
		{"less than an hour before it expires", old.NotAfter().Add(-time.Hour + time.Second), false},
		{"after it expired", old.NotAfter().Add(time.Second), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca, err := env.c.ca.signer(tc.at)
			if tc.usable {
				if err != nil || ca != old {
					t.Errorf("signer = %v, %v; want the old CA", ca, err)
				}
				return
			}
			var noCA errNoCA
			if !errors.As(err, &noCA) {
				t.Fatalf("signer = %v, %v; want an errNoCA", ca, err)
			}
			if !strings.Contains(err.Error(), "Unavailable") {
				t.Errorf("signer = %q, want it to say why the renewal failed", err)
			}
			if !errors.Is(err, podcert.ErrCATooShort) {
				t.Errorf("signer = %q, want it to wrap podcert.ErrCATooShort: a CA is held, it expires too soon", err)
			}
		})
	}
}
