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

package podcert

import (
	"strings"
	"testing"
)

func TestCheckAnnotations(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        string
		wantDenied  bool
		wantInMsg   []string
		notInMsg    []string
	}{
		{name: "none"},
		{name: "empty map", annotations: map[string]string{}},
		{name: "names a ClusterSPIFFEID", annotations: map[string]string{AnnotationClusterSPIFFEID: "web"}, want: "web"},
		{name: "dotted name", annotations: map[string]string{AnnotationClusterSPIFFEID: "team-a.web"}, want: "team-a.web"},
		{
			name: "unknown key", annotations: map[string]string{"example.com/flavour": "x"},
			wantDenied: true, wantInMsg: []string{`key "example.com/flavour"`, AnnotationClusterSPIFFEID},
		},
		{
			name:        "unknown key beside the known one",
			annotations: map[string]string{AnnotationClusterSPIFFEID: "web", "example.com/flavour": "x"},
			wantDenied:  true, wantInMsg: []string{`"example.com/flavour"`},
		},
		{
			name: "many unknown keys",
			annotations: map[string]string{
				"a.example/1": "", "a.example/2": "", "a.example/3": "", "a.example/4": "", "a.example/5": "",
			},
			wantDenied: true, wantInMsg: []string{`keys "a.example/1", "a.example/2", "a.example/3" and 2 more`}, notInMsg: []string{"a.example/4"},
		},
		{
			name: "long unknown key is cut", annotations: map[string]string{"example.com/" + strings.Repeat("k", 300): ""},
			wantDenied: true, wantInMsg: []string{`"…`}, notInMsg: []string{strings.Repeat("k", 100)},
		},
		{
			name: "empty name", annotations: map[string]string{AnnotationClusterSPIFFEID: ""},
			wantDenied: true, wantInMsg: []string{"not the name of a ClusterSPIFFEID"},
		},
		{
			name: "invalid name", annotations: map[string]string{AnnotationClusterSPIFFEID: "Web_1"},
			wantDenied: true, wantInMsg: []string{`"Web_1"`},
		},
		{
			name: "long invalid name is cut", annotations: map[string]string{AnnotationClusterSPIFFEID: strings.Repeat("a", 300)},
			wantDenied: true, notInMsg: []string{strings.Repeat("a", 100)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, d := CheckAnnotations(tc.annotations)
			if !tc.wantDenied {
				if d != nil {
					t.Fatalf("denied: %s", d.Message)
				}
				if got != tc.want {
					t.Errorf("ClusterSPIFFEID %q, want %q", got, tc.want)
				}
				return
			}
			if d == nil {
				t.Fatalf("accepted with %q", got)
			}
			if got != "" {
				t.Errorf("denied, yet named %q", got)
			}
			if d.Reason != ReasonInvalidUnverifiedUserAnnotations || d.Type() != "Denied" {
				t.Errorf("decision %s %s, want Denied %s", d.Type(), d.Reason, ReasonInvalidUnverifiedUserAnnotations)
			}
			for _, s := range tc.wantInMsg {
				if !strings.Contains(d.Message, s) {
					t.Errorf("message %q does not contain %q", d.Message, s)
				}
			}
			for _, s := range tc.notInMsg {
				if strings.Contains(d.Message, s) {
					t.Errorf("message %q contains %q", d.Message, s)
				}
			}
		})
	}
}
