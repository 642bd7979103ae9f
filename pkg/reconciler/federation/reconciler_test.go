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

package federation

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestClassMatches(t *testing.T) {
	tests := []struct {
		class Class
		// want lists which of "", "mine" and "other" match.
		want []string
	}{
		{class: Class{}, want: []string{""}},
		{class: Class{WatchClassless: true}, want: []string{""}},
		{class: Class{Name: "mine"}, want: []string{"mine"}},
		{class: Class{Name: "mine", WatchClassless: true}, want: []string{"", "mine"}},
	}
	for _, tt := range tests {
		var got []string
		for _, className := range []string{"", "mine", "other"} {
			if tt.class.Matches(className) {
				got = append(got, className)
			}
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%+v matches (-want +got):\n%s", tt.class, diff)
		}
	}
}
