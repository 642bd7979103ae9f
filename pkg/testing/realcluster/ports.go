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

package realcluster

import (
	"fmt"
	"net"
	"strings"
)

// freePorts returns n distinct TCP ports that were free on 127.0.0.1 a moment
// ago. All listeners are held open together so the ports differ from each
// other; another process can still take one before our child binds it, which
// callers handle by retrying start-up (see isAddrInUse).
func freePorts(n int) ([]int, error) {
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port on 127.0.0.1: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// startAttempts bounds the retries after losing a port race.
const startAttempts = 3

// isAddrInUse reports whether a start-up failure was caused by a port that
// another process grabbed between freePorts and our child binding it.
func isAddrInUse(err error) bool {
	// Go programs say "address already in use", PostgreSQL "Address already in use".
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "address already in use")
}

// startOnFreePorts starts a process that binds ports it was just given, and retries on new
// ports when it lost one to another process. launch picks the ports and starts the process; an
// error there ends the attempts as it is. ready waits until the process serves; a process that
// does not is killed, and started again only if it failed for a port in use, up to
// startAttempts times. what names the process in the error.
func startOnFreePorts(what string, launch func() (*process, error), ready func() error) error {
	var lastErr error
	for range startAttempts {
		proc, err := launch()
		if err != nil {
			return err
		}
		if lastErr = ready(); lastErr == nil {
			return nil
		}
		proc.kill()
		if !isAddrInUse(lastErr) {
			break
		}
	}
	return fmt.Errorf("start %s: %w", what, lastErr)
}
