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

package render

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"golang.org/x/net/idna"
)

// parseSelector parses "type:value". The value may contain colons (k8s:pod-label:app:web);
// the type may not, and neither part may be empty.
func parseSelector(s string) (*spiretypes.Selector, error) {
	typ, value, ok := strings.Cut(s, ":")
	switch {
	case !ok:
		return nil, fmt.Errorf("selector %q is not of the form type:value", s)
	case typ == "":
		return nil, fmt.Errorf("selector %q has an empty type", s)
	case value == "":
		return nil, fmt.Errorf("selector %q has an empty value", s)
	case strings.ContainsFunc(s, unicode.IsControl):
		// Control characters have no place in a selector, and NUL separates the fields of
		// an entry key.
		return nil, fmt.Errorf("selector %q contains a control character", s)
	}
	return &spiretypes.Selector{Type: typ, Value: value}, nil
}

// dnsProfile is the IDNA profile SPIRE 1.15.3 checks entry DNS names with
// (pkg/common/x509util.ValidateLabel), so that what renders is exactly what SPIRE accepts.
var dnsProfile = idna.New(
	idna.StrictDomainName(true),
	idna.ValidateLabels(true),
	idna.VerifyDNSLength(true),
	idna.CheckJoiners(true),
	idna.BidiRule(),
	idna.CheckHyphens(true),
)

// validateDNSName accepts the DNS names SPIRE accepts for an entry: ASCII, upper case included,
// with at most one wildcard, as the whole first label.
func validateDNSName(name string) error {
	for i := 0; i < len(name); i++ {
		if name[i] >= utf8.RuneSelf {
			return fmt.Errorf("invalid DNS name %q: not ASCII", name)
		}
	}
	rest := name
	if strings.Contains(name, "*") {
		var wildcard bool
		rest, wildcard = strings.CutPrefix(name, "*.")
		if !wildcard || strings.Contains(rest, "*") {
			return fmt.Errorf("invalid DNS name %q: a wildcard must be the whole first label, and the only one", name)
		}
	}
	rest = strings.TrimSpace(rest)
	switch {
	case rest == "":
		return fmt.Errorf("invalid DNS name %q: empty", name)
	case strings.HasSuffix(rest, "."):
		return fmt.Errorf("invalid DNS name %q: ends with a dot", name)
	}
	checked, err := dnsProfile.ToASCII(rest)
	if err != nil {
		return fmt.Errorf("invalid DNS name %q: %w", name, err)
	}
	if checked != rest {
		return fmt.Errorf("invalid DNS name %q: not in IDNA ASCII form", name)
	}
	return nil
}

// ttlSeconds converts a TTL to SPIRE's seconds, saturating instead of overflowing.
func ttlSeconds(d time.Duration) int32 {
	s := d / time.Second
	if s > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(s)
}

// dedupe drops repeated strings, keeping the first of each and the order: the first DNS name
// of an entry becomes the SVID's common name, so order matters.
func dedupe(values []string) []string {
	if len(values) < 2 {
		return values
	}
	seen := make(map[string]struct{}, len(values))
	out := values[:0:0]
	for _, v := range values {
		if _, ok := seen[v]; !ok {
			seen[v] = struct{}{}
			out = append(out, v)
		}
	}
	return out
}
