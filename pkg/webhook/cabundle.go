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

package webhook

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// encodeCABundle is the PEM form of SPIRE's X.509 authorities, as caBundle wants it.
func encodeCABundle(authorities []*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, cert := range authorities {
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	}
	return buf.Bytes()
}

// certificateDNSNames are the names the serving certificate must carry: <service>.<namespace>.svc
// of every webhook that calls a Service, and the extra names given, sorted and without repeats.
// Webhooks that call a URL add none: their host is one of the extra names.
func certificateDNSNames(config *admissionregistrationv1.ValidatingWebhookConfiguration, extra []string) []string {
	names := slices.Clone(extra)
	for _, hook := range config.Webhooks {
		svc := hook.ClientConfig.Service
		if svc == nil || svc.Name == "" || svc.Namespace == "" {
			continue
		}
		names = append(names, svc.Name+"."+svc.Namespace+".svc")
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// caBundlePatch returns a JSON patch that sets caBundle on every webhook whose caBundle differs,
// or nil when all are current. Each replaced webhook is tested by name first, so a patch made
// from a stale copy fails instead of writing the bundle into the wrong webhook.
func caBundlePatch(config *admissionregistrationv1.ValidatingWebhookConfiguration, caBundle []byte) ([]byte, error) {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	var ops []op
	for i, hook := range config.Webhooks {
		if bytes.Equal(hook.ClientConfig.CABundle, caBundle) {
			continue
		}
		ops = append(ops,
			op{Op: "test", Path: fmt.Sprintf("/webhooks/%d/name", i), Value: hook.Name},
			op{Op: "add", Path: fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", i), Value: caBundle},
		)
	}
	if len(ops) == 0 {
		return nil, nil
	}
	return json.Marshal(ops)
}
