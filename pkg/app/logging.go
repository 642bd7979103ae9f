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
	"fmt"
	"strconv"
	"strings"

	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/spire-registrar/spire-registrar/pkg/config"
)

// debugVerbosity is klog's verbosity for logLevel debug: kube components' "debug-level"
// verbosity, which shows every V(n) message this module writes.
const debugVerbosity = 4

// logSettings is the klog verbosity and log format the binary runs with.
type logSettings struct {
	// Verbosity is klog's -v; VerbosityFromFlag says -v was given and must be kept.
	Verbosity         int
	VerbosityFromFlag bool
	// Format is a component-base log format: "text" (klog's own) or "json".
	Format string
	// Notes say what of the settings could not be honoured, for the log once it is set up.
	Notes []string
}

// loggingSettings resolves the log settings as spire-controller-manager does: its flags
// (--zap-log-level, --zap-encoder) win over the config file's logLevel and logEncoding, and
// klog's own -v, when given, wins over both. klog filters informational messages by
// verbosity, not by severity, so warn and error keep verbosity 0, and the note says so.
func loggingSettings(cfg *config.Config, flags LogFlags, opts *Options, currentVerbosity int) (logSettings, error) {
	s := logSettings{Verbosity: currentVerbosity, VerbosityFromFlag: opts.isSet("v"), Format: "text"}
	level := cfg.LogLevel
	if !s.VerbosityFromFlag {
		switch v, err := zapLevelVerbosity(flags.ZapLogLevel); {
		case err != nil:
			return s, err
		case flags.ZapLogLevel != "" && v >= 0:
			s.Verbosity = v
			level = ""
		default:
			s.Verbosity = 0
			if level == config.LogLevelDebug {
				s.Verbosity = debugVerbosity
			}
		}
		if level == config.LogLevelWarn || level == config.LogLevelError || flags.ZapLogLevel == "error" || flags.ZapLogLevel == "panic" {
			s.Notes = append(s.Notes, "klog has no severity threshold: with log level warn or error, messages at verbosity 0 are still logged")
		}
	}
	encoding := cfg.LogEncoding
	if opts.isSet("zap-encoder") {
		encoding = flags.ZapEncoder
	}
	switch encoding {
	case config.LogEncodingConsole:
	case config.LogEncodingJSON:
		s.Format = logsapi.JSONLogFormat
	default:
		return s, fmt.Errorf("--zap-encoder: unsupported encoding %q, want console or json", encoding)
	}
	for _, name := range []string{"zap-devel", "zap-stacktrace-level", "zap-time-encoding"} {
		if opts.isSet(name) {
			s.Notes = append(s.Notes, "--"+name+" only changes controller-runtime's zap logger and has no effect here")
		}
	}
	return s, nil
}

// zapLevelVerbosity maps a --zap-log-level value to a klog verbosity; -1 when it is empty.
func zapLevelVerbosity(level string) (int, error) {
	switch strings.ToLower(level) {
	case "":
		return -1, nil
	case "debug":
		return debugVerbosity, nil
	case "info", "error", "panic":
		return 0, nil
	}
	// As in controller-runtime, an integer N > 0 enables logr's V(N) messages.
	n, err := strconv.Atoi(level)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("--zap-log-level: %q is not debug, info, error, panic or an integer above 0", level)
	}
	return n, nil
}

// applyLogging sets klog's verbosity on fs (the flag set klog's flags are registered on) and,
// for JSON, makes component-base's JSON logger klog's backend, as kube components do. The
// JSON format must have been registered by the binary (k8s.io/component-base/logs/json/register).
// Text keeps klog's own output, so every klog flag keeps working.
func applyLogging(s logSettings, fs *flag.FlagSet) error {
	if s.Format == "text" {
		if s.VerbosityFromFlag {
			return nil
		}
		return fs.Set("v", strconv.Itoa(s.Verbosity))
	}
	c := logsapi.NewLoggingConfiguration()
	c.Format = s.Format
	c.Verbosity = logsapi.VerbosityLevel(s.Verbosity)
	if err := logsapi.ValidateAndApply(c, nil); err != nil {
		return fmt.Errorf("applying logEncoding %s: %w", s.Format, err)
	}
	return nil
}

// currentVerbosity is klog's -v as registered on fs.
func currentVerbosity(fs *flag.FlagSet) int {
	f := fs.Lookup("v")
	if f == nil {
		return 0
	}
	v, _ := strconv.Atoi(f.Value.String())
	return v
}
