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
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// This file validates the fields spire-controller-manager inherits from controller-runtime's
// manager (logging, caches, webhook, shutdown, controller settings). Each is honoured when it
// has a meaning here, and otherwise recorded in Config.Unused for the binary to log.

// validateLogging applies logLevel and logEncoding. Like spire-controller-manager, the level
// is case-insensitive.
func (f *File) validateLogging(cfg *Config) field.ErrorList {
	var errs field.ErrorList
	cfg.LogLevel, cfg.LogEncoding = LogLevelInfo, LogEncodingConsole
	if f.LogLevel != "" {
		level := strings.ToLower(f.LogLevel)
		levels := []string{LogLevelDebug, LogLevelInfo, LogLevelWarn, LogLevelError}
		if slices.Contains(levels, level) {
			cfg.LogLevel = level
		} else {
			errs = append(errs, field.NotSupported(field.NewPath("logLevel"), f.LogLevel, levels))
		}
	}
	if f.LogEncoding != "" {
		encodings := []string{LogEncodingConsole, LogEncodingJSON}
		if slices.Contains(encodings, f.LogEncoding) {
			cfg.LogEncoding = f.LogEncoding
		} else {
			errs = append(errs, field.NotSupported(field.NewPath("logEncoding"), f.LogEncoding, encodings))
		}
	}
	return errs
}

// validateCaches applies the settings that narrow what is watched: the ClusterSPIFFEID label
// selector and the namespaces of namespaced objects.
func (f *File) validateCaches(cfg *Config) field.ErrorList {
	var errs field.ErrorList
	if len(f.ClusterSPIFFEIDLabelSelector) > 0 || f.FilterByClassName {
		cfg.ClusterSPIFFEIDLabels = maps.Clone(f.ClusterSPIFFEIDLabelSelector)
		if cfg.ClusterSPIFFEIDLabels == nil {
			cfg.ClusterSPIFFEIDLabels = map[string]string{}
		}
		if _, err := labels.ValidatedSelectorFromSet(cfg.ClusterSPIFFEIDLabels); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("clusterSPIFFEIDLabelSelector"), f.ClusterSPIFFEIDLabelSelector, err.Error()))
		}
	}
	if f.FilterByClassName {
		// As in spire-controller-manager, the class label wins over the selector's own value.
		if f.ClassName == "" {
			errs = append(errs, field.Required(field.NewPath("className"), "filterByClassName selects ClusterSPIFFEIDs by it"))
		}
		cfg.ClusterSPIFFEIDLabels[ClassNameLabel] = f.ClassName
	}

	switch {
	case f.CacheNamespace != "" && len(f.CacheNamespaces) > 0:
		errs = append(errs, field.Forbidden(field.NewPath("cacheNamespace"), "set cacheNamespace or cacheNamespaces, not both"))
	case f.CacheNamespace != "":
		cfg.CacheNamespaces = map[string]NamespaceCache{f.CacheNamespace: {}}
	case len(f.CacheNamespaces) > 0:
		cfg.CacheNamespaces = map[string]NamespaceCache{}
		for _, ns := range slices.Sorted(maps.Keys(f.CacheNamespaces)) {
			nc, path := NamespaceCache{}, field.NewPath("cacheNamespaces").Key(ns)
			if in := f.CacheNamespaces[ns]; in != nil {
				if sel, err := labels.ValidatedSelectorFromSet(in.LabelSelectors); err != nil {
					errs = append(errs, field.Invalid(path.Child("labelSelectors"), in.LabelSelectors, err.Error()))
				} else if len(in.LabelSelectors) > 0 {
					nc.LabelSelector = sel.String()
				}
				if len(in.FieldSelectors) > 0 {
					nc.FieldSelector = fields.SelectorFromSet(in.FieldSelectors).String()
					if _, err := fields.ParseSelector(nc.FieldSelector); err != nil || slices.Contains(slices.Collect(maps.Keys(in.FieldSelectors)), "") {
						errs = append(errs, field.Invalid(path.Child("fieldSelectors"), in.FieldSelectors, "want field: value pairs, like spec.nodeName: node-1"))
					}
				}
			}
			cfg.CacheNamespaces[ns] = nc
		}
		errs = append(errs, validateSharedSelectors(cfg.CacheNamespaces)...)
	}
	return errs
}

// validateSharedSelectors refuses different selectors for different namespaces. With one
// namespace the watch itself is narrowed; with several, the watch stays cluster-wide (one
// watch per namespace and kind would cost more than it saves) and can only carry selectors
// that every namespace shares.
func validateSharedSelectors(namespaces map[string]NamespaceCache) field.ErrorList {
	if len(namespaces) < 2 {
		return nil
	}
	names := slices.Sorted(maps.Keys(namespaces))
	first := namespaces[names[0]]
	for _, ns := range names[1:] {
		if namespaces[ns] != first {
			return field.ErrorList{field.Invalid(field.NewPath("cacheNamespaces").Key(ns), ns,
				"with several namespaces, spire-registrar needs the same labelSelectors and fieldSelectors for each: they narrow one cluster-wide watch")}
		}
	}
	return nil
}

// validateManager applies controller-runtime's manager settings: shutdown, cache sync, gRPC,
// the webhook server, and records those that have no meaning here.
func (f *File) validateManager(cfg *Config) field.ErrorList {
	var errs field.ErrorList
	cfg.GracefulShutdownTimeout = DefaultGracefulShutdownTimeout
	if f.GracefulShutdown != nil {
		if err := f.GracefulShutdown.validateParsed(field.NewPath("gracefulShutDown")); err != nil {
			errs = append(errs, err)
		}
		cfg.GracefulShutdownTimeout = f.GracefulShutdown.Duration
	}
	if f.GRPC != nil && f.GRPC.MaxCallRecvMsgSize > 0 {
		cfg.GRPCMaxCallRecvMsgSize = f.GRPC.MaxCallRecvMsgSize
	}

	cfg.ValidatingWebhookConfigurationName = f.ValidatingWebhookConfigurationName
	cfg.Webhook.Port = DefaultWebhookPort
	if w := f.Webhook; w != nil {
		if w.Port != nil {
			if *w.Port < 1 || *w.Port > 65535 {
				errs = append(errs, field.Invalid(field.NewPath("webhook", "port"), *w.Port, "must be a port number, 1 to 65535"))
			}
			cfg.Webhook.Port = *w.Port
		}
		cfg.Webhook.Host, cfg.Webhook.CertDir = w.Host, w.CertDir
		if w.CertDir != "" {
			cfg.unused("webhook.certDir", "the serving certificate is minted from SPIRE, as spire-controller-manager does")
		}
	}

	if f.SyncPeriod != nil {
		if err := f.SyncPeriod.validateParsed(field.NewPath("syncPeriod")); err != nil {
			errs = append(errs, err)
		}
		cfg.unused("syncPeriod", "informers do not resync: every event is handled as it comes, and gcInterval bounds how long SPIRE stays unrepaired")
	}
	if f.EnableEntryRenderCache || f.EntryRenderCacheSize != 0 {
		cfg.unused("enableEntryRenderCache, entryRenderCacheSize", "rendering is already incremental: an event renders only the pods it affects")
	}
	if c := f.Controller; c != nil {
		path := field.NewPath("controller")
		if c.CacheSyncTimeout != nil {
			if err := c.CacheSyncTimeout.validate(path.Child("cacheSyncTimeout")); err != nil {
				errs = append(errs, err)
			}
			cfg.CacheSyncTimeout = c.CacheSyncTimeout.Duration
		}
		if len(c.GroupKindConcurrency) > 0 {
			cfg.unused("controller.groupKindConcurrency", "workers are per controller and set by --workers")
		}
		if c.RecoverPanic != nil {
			cfg.unused("controller.recoverPanic", "a panic is never recovered: the process exits and restarts with fresh caches, as kube-controller-manager does")
		}
	}
	return errs
}

// unused records a field that is accepted but has no effect.
func (c *Config) unused(field, reason string) {
	c.Unused = append(c.Unused, UnusedField{Field: field, Reason: reason})
}
