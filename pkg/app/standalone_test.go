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
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/klog/v2/ktesting"

	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/metrics"
)

// gaugeValue reads a gauge's current value.
func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// TestReportConfigFields: the fields a config file has that its format does not declare, and
// those it sets twice, are each warned of once, by path and with the field probably meant, and
// counted in the metrics; a clean file sets the counts back to zero.
func TestReportConfigFields(t *testing.T) {
	cfg, err := config.Parse([]byte("trustDomain: example.org\nclusterName: demo\nclusterName: other\n" +
		"trustdomain: x.org\nleaderElection: {foo: 1}\nsyncPeriod: 1h\n"))
	if err != nil {
		t.Fatal(err)
	}
	logger := ktesting.NewLogger(ktesting.NopTL{}, ktesting.NewConfig(ktesting.BufferLogs(true)))
	reportConfigFields(logger, cfg)

	logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
	for _, want := range []string{
		`Warning: ignoring an unknown config field, probably misspelt field="trustdomain" didYouMean="trustDomain"`,
		`Warning: ignoring an unknown config field, perhaps one of a newer spire-controller-manager field="leaderElection.foo"`,
		`Warning: config field set more than once; the last value is used field="clusterName"`,
		`Config field accepted but without effect field="syncPeriod"`,
	} {
		if strings.Count(logs, want) != 1 {
			t.Errorf("logs do not hold %s once:\n%s", want, logs)
		}
	}
	if got := gaugeValue(t, metrics.ConfigUnknownFields); got != 2 {
		t.Errorf("%s = %v, want 2", "spire_registrar_config_unknown_fields", got)
	}
	if got := gaugeValue(t, metrics.ConfigDuplicateFields); got != 1 {
		t.Errorf("%s = %v, want 1", "spire_registrar_config_duplicate_fields", got)
	}

	clean, err := config.Parse([]byte("trustDomain: example.org\nclusterName: demo\n"))
	if err != nil {
		t.Fatal(err)
	}
	reportConfigFields(logger, clean)
	if u, d := gaugeValue(t, metrics.ConfigUnknownFields), gaugeValue(t, metrics.ConfigDuplicateFields); u != 0 || d != 0 {
		t.Errorf("after a clean file: unknown %v, duplicates %v, want 0 and 0", u, d)
	}
}
