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

package config

import (
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// StaticManifestLimitsConfig caps the bytes static mode reads: a file over maxFileSize is
// not read, and a file whose content would take all the files applied over maxTotalSize is
// not applied; either keeps what the file declared before. Sizes are Kubernetes quantities
// ("4Mi") or byte counts; unset keeps static mode's defaults (4Mi and 64Mi).
type StaticManifestLimitsConfig struct {
	MaxFileSize  *intstr.IntOrString `json:"maxFileSize"`
	MaxTotalSize *intstr.IntOrString `json:"maxTotalSize"`
}

// validate applies the limits to cfg; l may be nil.
func (l *StaticManifestLimitsConfig) validate(cfg *Config) field.ErrorList {
	if l == nil {
		return nil
	}
	path := field.NewPath("staticManifestLimits")
	var errs field.ErrorList
	size := func(name string, value *intstr.IntOrString, into *int64) {
		if value == nil {
			return
		}
		q, err := resource.ParseQuantity(value.String())
		if err != nil {
			errs = append(errs, field.Invalid(path.Child(name), value.String(), "must be a size in bytes, like 4Mi or 4194304"))
			return
		}
		v, ok := q.AsInt64()
		if !ok || v <= 0 {
			errs = append(errs, field.Invalid(path.Child(name), value.String(), "must be a positive whole number of bytes"))
			return
		}
		*into = v
	}
	size("maxFileSize", l.MaxFileSize, &cfg.StaticManifestMaxFileSize)
	size("maxTotalSize", l.MaxTotalSize, &cfg.StaticManifestMaxTotalSize)
	if f, t := cfg.StaticManifestMaxFileSize, cfg.StaticManifestMaxTotalSize; f > 0 && t > 0 && f > t {
		errs = append(errs, field.Invalid(path.Child("maxFileSize"), l.MaxFileSize.String(), "must not be larger than maxTotalSize"))
	}
	return errs
}
