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
	"net"
	"net/url"
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
// of every webhook that calls a Service, the host name of every webhook called by URL (as when
// running outside the cluster; an IP address cannot go into an X509-SVID), and the extra names
// given, sorted and without repeats.
func certificateDNSNames(config *admissionregistrationv1.ValidatingWebhookConfiguration, extra []string) []string {
	names := slices.Clone(extra)
	for _, hook := range config.Webhooks {
		if svc := hook.ClientConfig.Service; svc != nil && svc.Name != "" && svc.Namespace != "" {
			names = append(names, svc.Name+"."+svc.Namespace+".svc")
		}
		if hook.ClientConfig.URL == nil {
			continue
		}
		if u, err := url.Parse(*hook.ClientConfig.URL); err == nil && u.Hostname() != "" && net.ParseIP(u.Hostname()) == nil {
			names = append(names, u.Hostname())
		}
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
