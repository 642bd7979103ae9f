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
	"flag"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/spire-registrar/spire-registrar/pkg/config"
)

func TestLoggingSettings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		config  string
		args    []string
		want    logSettings
		notes   int
		wantErr bool
	}{
		{name: "defaults", want: logSettings{Verbosity: 0, Format: "text"}},
		{name: "debug", config: "logLevel: debug\n", want: logSettings{Verbosity: 4, Format: "text"}},
		{name: "json", config: "logEncoding: json\n", want: logSettings{Format: "json"}},
		{name: "warn is verbosity 0 with a note", config: "logLevel: warn\n", want: logSettings{Format: "text"}, notes: 1},
		{name: "-v wins over logLevel", config: "logLevel: debug\n", args: []string{"-v=2"},
			want: logSettings{Verbosity: 2, VerbosityFromFlag: true, Format: "text"}},
		{name: "--zap-log-level wins over logLevel", config: "logLevel: debug\n", args: []string{"--zap-log-level=info"},
			want: logSettings{Verbosity: 0, Format: "text"}},
		{name: "--zap-log-level integer", args: []string{"--zap-log-level=3"}, want: logSettings{Verbosity: 3, Format: "text"}},
		{name: "--zap-encoder wins over logEncoding", config: "logEncoding: json\n", args: []string{"--zap-encoder=console"},
			want: logSettings{Format: "text"}},
		{name: "zap-only flags are noted", args: []string{"--zap-devel=false", "--zap-time-encoding=rfc3339"},
			want: logSettings{Format: "text"}, notes: 2},
		{name: "bad --zap-log-level", args: []string{"--zap-log-level=loud"}, wantErr: true},
		{name: "bad --zap-encoder", args: []string{"--zap-encoder=logfmt"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte("trustDomain: example.org\nclusterName: c\n" + tc.config))
			if err != nil {
				t.Fatal(err)
			}
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			v := fs.Int("v", 0, "klog verbosity")
			var opts Options
			opts.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			opts.Parsed(fs)
			got, err := loggingSettings(cfg, opts.Log, &opts, *v)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(logSettings{}, "Notes")); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if len(got.Notes) != tc.notes {
				t.Errorf("notes = %q, want %d", got.Notes, tc.notes)
			}
		})
	}
}
