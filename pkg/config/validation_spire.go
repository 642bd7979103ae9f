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
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateSPIREConnection applies how SPIRE is reached: the local admin socket
// (spireServerSocketPath, spire-controller-manager's only way) or, spire-registrar's addition,
// the server API over TCP with SPIFFE mTLS (spireServerAddress, with workloadAPISocketPath and
// spireServerSPIFFEID). The two are alternatives: a file that names both is refused rather
// than one being silently ignored.
func (f *File) validateSPIREConnection(cfg *Config) field.ErrorList {
	cfg.spireConnection = spireConnectionFields{socketPath: f.SPIREServerSocketPath, address: f.SPIREServerAddress,
		workloadAPISocketPath: f.WorkloadAPISocketPath, serverSPIFFEID: f.SPIREServerSPIFFEID}
	addressPath := field.NewPath("spireServerAddress")
	if f.SPIREServerAddress == "" {
		var errs field.ErrorList
		for _, only := range []struct{ name, value string }{
			{"workloadAPISocketPath", f.WorkloadAPISocketPath},
			{"spireServerSPIFFEID", f.SPIREServerSPIFFEID},
		} {
			if only.value != "" {
				errs = append(errs, field.Invalid(field.NewPath(only.name), only.value, "only has an effect with spireServerAddress"))
			}
		}
		if cfg.SPIREServerSocketPath == "" {
			cfg.SPIREServerSocketPath, cfg.socketPathDefaulted = DefaultSPIREServerSocketPath, true
		}
		return errs
	}

	var errs field.ErrorList
	if f.SPIREServerSocketPath != "" {
		errs = append(errs, field.Forbidden(addressPath,
			"set either spireServerSocketPath (the local admin socket) or spireServerAddress (TCP with SPIFFE mTLS), not both"))
	}
	cfg.SPIREServerSocketPath = ""
	cfg.SPIREServerAddress = f.SPIREServerAddress
	if err := validateDialAddress(addressPath, f.SPIREServerAddress); err != nil {
		errs = append(errs, err)
	}

	socketPath := field.NewPath("workloadAPISocketPath")
	switch {
	case f.WorkloadAPISocketPath != "":
		if !filepath.IsAbs(f.WorkloadAPISocketPath) {
			errs = append(errs, field.Invalid(socketPath, f.WorkloadAPISocketPath, "must be an absolute path to the SPIRE agent's Workload API socket"))
		} else {
			cfg.WorkloadAPIAddress = "unix://" + filepath.Clean(f.WorkloadAPISocketPath)
		}
	case os.Getenv(SPIFFEEndpointSocketEnv) != "":
		env := os.Getenv(SPIFFEEndpointSocketEnv)
		// The specification's form is a URI; a bare path is accepted too, as often written.
		if filepath.IsAbs(env) {
			env = "unix://" + filepath.Clean(env)
		}
		if err := workloadapi.ValidateAddress(env); err != nil {
			errs = append(errs, field.Invalid(socketPath, env, "unset, and the default from "+SPIFFEEndpointSocketEnv+" is not a Workload API address: "+err.Error()))
		} else {
			cfg.WorkloadAPIAddress = env
		}
	default:
		errs = append(errs, field.Required(socketPath,
			"spireServerAddress needs the SPIRE agent's Workload API socket for spire-registrar's own X509-SVID (or set "+SPIFFEEndpointSocketEnv+")"))
	}

	idPath := field.NewPath("spireServerSPIFFEID")
	switch {
	case f.SPIREServerSPIFFEID != "":
		id, err := spiffeid.FromString(f.SPIREServerSPIFFEID)
		if err != nil {
			errs = append(errs, field.Invalid(idPath, f.SPIREServerSPIFFEID, err.Error()))
		} else {
			cfg.SPIREServerID = id
		}
	case !cfg.TrustDomain.IsZero():
		// trustDomain was valid; otherwise its own error says so.
		id, err := spiffeid.FromPath(cfg.TrustDomain, DefaultSPIREServerIDPath)
		if err != nil {
			errs = append(errs, field.Invalid(idPath, cfg.TrustDomain.IDString()+DefaultSPIREServerIDPath, err.Error()))
		}
		cfg.SPIREServerID = id
	}
	return errs
}

// spireConnectionFields are the file's fields on how SPIRE is reached, kept so that flags can
// be applied over them and validated again.
type spireConnectionFields struct {
	socketPath, address, workloadAPISocketPath, serverSPIFFEID string
}

// UseSPIREServerAddressFlags applies --spire-server-address and --workload-api-socket over
// the file, as flags override the file's fields: an address replaces the file's
// spireServerSocketPath (or address), a socket path its workloadAPISocketPath. Empty values
// leave the file's. The result is validated as the file is; on error the Config is unchanged.
func (c *Config) UseSPIREServerAddressFlags(address, workloadAPISocketPath string) error {
	f := File{SPIREServerSocketPath: c.spireConnection.socketPath, SPIREServerAddress: c.spireConnection.address,
		WorkloadAPISocketPath: c.spireConnection.workloadAPISocketPath, SPIREServerSPIFFEID: c.spireConnection.serverSPIFFEID}
	if address != "" {
		f.SPIREServerAddress, f.SPIREServerSocketPath = address, ""
	}
	if workloadAPISocketPath != "" {
		f.WorkloadAPISocketPath = workloadAPISocketPath
	}
	next := &Config{TrustDomain: c.TrustDomain, SPIREServerSocketPath: f.SPIREServerSocketPath}
	if errs := f.validateSPIREConnection(next); len(errs) > 0 {
		return fmt.Errorf("--spire-server-address, --workload-api-socket: %w", errs.ToAggregate())
	}
	c.spireConnection = next.spireConnection
	c.SPIREServerSocketPath, c.socketPathDefaulted = next.SPIREServerSocketPath, next.socketPathDefaulted
	c.SPIREServerAddress, c.WorkloadAPIAddress, c.SPIREServerID = next.SPIREServerAddress, next.WorkloadAPIAddress, next.SPIREServerID
	return nil
}

// validateDialAddress accepts a host:port to connect to: both parts present, the port a
// number from 1 to 65535.
func validateDialAddress(path *field.Path, addr string) *field.Error {
	host, port, err := net.SplitHostPort(addr)
	if err == nil && strings.TrimSpace(host) == "" {
		return field.Invalid(path, addr, "want host:port; the host is missing")
	}
	if err == nil {
		var n uint64
		if n, err = strconv.ParseUint(port, 10, 16); err == nil && n == 0 {
			return field.Invalid(path, addr, "the port must be 1 to 65535")
		}
	}
	if err != nil {
		return field.Invalid(path, addr, "want host:port with a numeric port, e.g. spire-server.spire-system:8081")
	}
	return nil
}
