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
	"net"
	"time"

	"k8s.io/client-go/rest"
)

// patientDialing is how the connections of informer clients wait for an API server that is
// away (see InformerConfig).
type patientDialing struct {
	// retry is the pause between two dials: the longest an informer waits for a returning
	// API server.
	retry time.Duration
	// limit is how long one connection waits in all. Above client-go's reflector backoff
	// reset (2 minutes), so that the reflector's next delay after a failed dial is its first,
	// short one; and it ends the dials of informers stopped meanwhile (net/http dials on after
	// the request is cancelled).
	limit time.Duration
}

var defaultPatientDialing = patientDialing{retry: time.Second, limit: 3 * time.Minute}

// InformerConfig returns a copy of config for the clients of informer factories: when the API
// server cannot be reached, their connections wait for it, dialling again every second,
// instead of failing at once.
//
// A reflector whose watch fails to connect backs off exponentially up to 30 s, jittered to
// up to a minute, so after an outage of a minute or more an informer may only see the API
// server again a minute after its return, and a new leader would write nothing until then
// (it waits for its caches to catch up). With this dialer the watch simply waits and resumes
// within a second of the return. Requests other than the informers' should keep failing fast:
// do not use it for the clients that write or hold the Lease.
func InformerConfig(config *rest.Config) *rest.Config {
	c := rest.CopyConfig(config)
	dial := c.Dial
	if dial == nil {
		// client-go's own default.
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	c.Dial = defaultPatientDialing.wrap(dial)
	return c
}

// wrap returns dial made patient: it dials again after each failure until it connects, ctx
// ends, or limit has passed, and then returns the last error.
func (p patientDialing) wrap(dial func(ctx context.Context, network, address string) (net.Conn, error)) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		deadline := time.Now().Add(p.limit)
		for {
			conn, err := dial(ctx, network, address)
			if err == nil || ctx.Err() != nil || time.Now().Add(p.retry).After(deadline) {
				return conn, err
			}
			timer := time.NewTimer(p.retry)
			select {
			case <-ctx.Done():
				timer.Stop()
				return nil, err
			case <-timer.C:
			}
		}
	}
}
