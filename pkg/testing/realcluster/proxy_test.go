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
	"bufio"
	"net"
	"testing"
)

// TestProxyBlocksAndUnblocks: a proxy forwards, refuses while blocked (cutting what it
// forwarded), and forwards again on the same port once unblocked.
func TestProxyBlocksAndUnblocks(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = echo.Close() })
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, err := bufio.NewReader(c).ReadString('\n')
				if err == nil {
					_, _ = c.Write([]byte(line))
				}
			}()
		}
	}()
	p := NewProxy(t, echo.Addr().String())
	roundTrip := func() error {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			return err
		}
		defer c.Close()
		if _, err := c.Write([]byte("hi\n")); err != nil {
			return err
		}
		_, err = bufio.NewReader(c).ReadString('\n')
		return err
	}
	if err := roundTrip(); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	held, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	p.Block()
	if err := roundTrip(); err == nil {
		t.Errorf("a blocked proxy forwarded")
	}
	if _, err := bufio.NewReader(held).ReadString('\n'); err == nil {
		t.Errorf("a connection open before the block was not cut")
	}
	if err := p.Unblock(); err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(); err != nil {
		t.Errorf("after unblocking: %v", err)
	}
}
