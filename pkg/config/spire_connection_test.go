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
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// spireConnection is what a config says about reaching SPIRE.
type spireConnection struct {
	SocketPath, Address, WorkloadAPI, ServerID string
	SocketPathDefaulted                        bool
}

func connectionOf(c *Config) spireConnection {
	return spireConnection{SocketPath: c.SPIREServerSocketPath, Address: c.SPIREServerAddress,
		WorkloadAPI: c.WorkloadAPIAddress, ServerID: c.SPIREServerID.String(), SocketPathDefaulted: c.socketPathDefaulted}
}

func TestSPIREConnection(t *testing.T) {
	for _, tc := range []struct {
		name, extra, env string
		want             spireConnection
	}{
		{name: "default admin socket", want: spireConnection{SocketPath: DefaultSPIREServerSocketPath, SocketPathDefaulted: true}},
		{name: "admin socket from the file", extra: "spireServerSocketPath: /run/spire/api.sock\n",
			want: spireConnection{SocketPath: "/run/spire/api.sock"}},
		{name: "the agent's socket ignored without an address", env: "unix:///agent.sock",
			want: spireConnection{SocketPath: DefaultSPIREServerSocketPath, SocketPathDefaulted: true}},
		{name: "address with every field",
			extra: "spireServerAddress: spire-server.spire-system:8081\nworkloadAPISocketPath: /run/spire/agent-sockets/spire-agent.sock\nspireServerSPIFFEID: spiffe://example.org/spire/server/a\n",
			env:   "unix:///ignored.sock",
			want: spireConnection{Address: "spire-server.spire-system:8081", WorkloadAPI: "unix:///run/spire/agent-sockets/spire-agent.sock",
				ServerID: "spiffe://example.org/spire/server/a"}},
		{name: "address with defaults from SPIFFE_ENDPOINT_SOCKET and the trust domain",
			extra: "spireServerAddress: 10.0.0.1:8081\n", env: "unix:///run/spire/agent.sock",
			want: spireConnection{Address: "10.0.0.1:8081", WorkloadAPI: "unix:///run/spire/agent.sock", ServerID: "spiffe://example.org/spire/server"}},
		{name: "SPIFFE_ENDPOINT_SOCKET as a bare path",
			extra: "spireServerAddress: \"[::1]:8081\"\n", env: "/run/spire/agent.sock",
			want: spireConnection{Address: "[::1]:8081", WorkloadAPI: "unix:///run/spire/agent.sock", ServerID: "spiffe://example.org/spire/server"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(SPIFFEEndpointSocketEnv, tc.env)
			cfg, err := Parse([]byte(minimal + tc.extra))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tc.want, connectionOf(cfg)); diff != "" {
				t.Errorf("SPIRE connection (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSPIREConnectionErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		name, extra, env, field, says string
	}{
		{name: "socket path and address", extra: "spireServerSocketPath: /api.sock\nspireServerAddress: spire:8081\nworkloadAPISocketPath: /agent.sock\n",
			field: "spireServerAddress", says: "not both"},
		{name: "no Workload API", extra: "spireServerAddress: spire:8081\n", field: "workloadAPISocketPath", says: "SPIFFE_ENDPOINT_SOCKET"},
		{name: "relative Workload API socket", extra: "spireServerAddress: spire:8081\nworkloadAPISocketPath: agent.sock\n",
			field: "workloadAPISocketPath", says: "absolute"},
		{name: "bad SPIFFE_ENDPOINT_SOCKET", extra: "spireServerAddress: spire:8081\n", env: "http://agent",
			field: "workloadAPISocketPath", says: "SPIFFE_ENDPOINT_SOCKET"},
		{name: "address without port", extra: "spireServerAddress: spire\nworkloadAPISocketPath: /agent.sock\n", field: "spireServerAddress", says: "host:port"},
		{name: "address without host", extra: "spireServerAddress: \":8081\"\nworkloadAPISocketPath: /agent.sock\n", field: "spireServerAddress", says: "host"},
		{name: "address port zero", extra: "spireServerAddress: spire:0\nworkloadAPISocketPath: /agent.sock\n", field: "spireServerAddress", says: "port"},
		{name: "address port by name", extra: "spireServerAddress: spire:grpc\nworkloadAPISocketPath: /agent.sock\n", field: "spireServerAddress", says: "numeric"},
		{name: "bad server ID", extra: "spireServerAddress: spire:8081\nworkloadAPISocketPath: /agent.sock\nspireServerSPIFFEID: example.org/spire/server\n",
			field: "spireServerSPIFFEID", says: "scheme"},
		{name: "Workload API socket without address", extra: "workloadAPISocketPath: /agent.sock\n", field: "workloadAPISocketPath", says: "spireServerAddress"},
		{name: "server ID without address", extra: "spireServerSPIFFEID: spiffe://example.org/spire/server\n", field: "spireServerSPIFFEID", says: "spireServerAddress"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(SPIFFEEndpointSocketEnv, tc.env)
			_, err := Parse([]byte(minimal + tc.extra))
			if err == nil {
				t.Fatalf("Parse accepted an invalid config")
			}
			if !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not name %q and say %q", err, tc.field, tc.says)
			}
		})
	}
}

// The deprecated --spire-api-socket flag must not turn a TCP config back to a socket.
func TestSPIREAPISocketFlagIgnoredWithAnAddress(t *testing.T) {
	cfg, err := Parse([]byte(minimal + "spireServerAddress: spire:8081\nworkloadAPISocketPath: /agent.sock\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.UseSPIREAPISocketFlag("/flag.sock") || cfg.SPIREServerSocketPath != "" {
		t.Errorf("the flag was used over spireServerAddress: socket path %q", cfg.SPIREServerSocketPath)
	}
}

func TestSPIREServerAddressFlags(t *testing.T) {
	const withAddress = "spireServerAddress: file:8081\nworkloadAPISocketPath: /file-agent.sock\n"
	for _, tc := range []struct {
		name, file, address, socket, env string
		want                             spireConnection
		wantErr                          string
	}{
		{name: "address flag replaces the file's socket path", file: "spireServerSocketPath: /api.sock\n", address: "flag:8081", socket: "/agent.sock",
			want: spireConnection{Address: "flag:8081", WorkloadAPI: "unix:///agent.sock", ServerID: "spiffe://example.org/spire/server"}},
		{name: "address flag with the Workload API from the environment", address: "flag:8081", env: "unix:///env.sock",
			want: spireConnection{Address: "flag:8081", WorkloadAPI: "unix:///env.sock", ServerID: "spiffe://example.org/spire/server"}},
		{name: "socket flag over the file's", file: withAddress, socket: "/flag-agent.sock",
			want: spireConnection{Address: "file:8081", WorkloadAPI: "unix:///flag-agent.sock", ServerID: "spiffe://example.org/spire/server"}},
		{name: "address flag over the file's", file: withAddress, address: "flag:8081",
			want: spireConnection{Address: "flag:8081", WorkloadAPI: "unix:///file-agent.sock", ServerID: "spiffe://example.org/spire/server"}},
		{name: "address flag without any Workload API", address: "flag:8081", wantErr: "workloadAPISocketPath"},
		{name: "socket flag without an address", socket: "/agent.sock", wantErr: "only has an effect with spireServerAddress"},
		{name: "bad address flag", address: "flag", socket: "/agent.sock", wantErr: "host:port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(SPIFFEEndpointSocketEnv, tc.env)
			cfg, err := Parse([]byte(minimal + tc.file))
			if err != nil {
				t.Fatal(err)
			}
			before := connectionOf(cfg)
			err = cfg.UseSPIREServerAddressFlags(tc.address, tc.socket)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "--spire-server-address") {
					t.Errorf("error %v, want one naming the flags and saying %q", err, tc.wantErr)
				}
				if diff := cmp.Diff(before, connectionOf(cfg)); diff != "" {
					t.Errorf("a refused flag changed the config (-before +after):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, connectionOf(cfg)); diff != "" {
				t.Errorf("SPIRE connection (-want +got):\n%s", diff)
			}
		})
	}
}
