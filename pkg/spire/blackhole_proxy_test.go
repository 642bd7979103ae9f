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

package spire

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// blackholeProxy forwards TCP connections from a loopback port to target. Blackhole makes
// the connections open at that moment stop forwarding in both directions while every socket
// stays open, as a network path that silently drops packets does; connections accepted
// later are forwarded, as a new path would be. Restore resumes the held ones, delivering
// what waited.
type blackholeProxy struct {
	lis    net.Listener
	target string

	mu       sync.Mutex
	conns    []*proxyConn
	accepted int
	// closedByServer counts connections the target ended first.
	closedByServer int
	closed         bool
	wg             sync.WaitGroup
}

// proxyConn is one forwarded connection.
type proxyConn struct {
	client, server net.Conn
	end            sync.Once

	mu sync.Mutex
	// gate is non-nil while the connection is blackholed; closing it resumes forwarding.
	gate chan struct{}
}

func newBlackholeProxy(t *testing.T, target string) *blackholeProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &blackholeProxy{lis: lis, target: target}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port.
func (p *blackholeProxy) Addr() string { return p.lis.Addr().String() }

func (p *blackholeProxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.lis.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		c := &proxyConn{client: client, server: server}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = client.Close()
			_ = server.Close()
			return
		}
		p.conns = append(p.conns, c)
		p.accepted++
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pump(c, c.server, c.client, false)
		go p.pump(c, c.client, c.server, true)
	}
}

// pump copies from src to dst, holding each chunk while c is blackholed. fromServer tells
// which side's end ends the connection.
func (p *blackholeProxy) pump(c *proxyConn, dst, src net.Conn, fromServer bool) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			c.wait()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			c.end.Do(func() {
				p.mu.Lock()
				if fromServer && errors.Is(err, io.EOF) && !p.closed {
					p.closedByServer++
				}
				p.mu.Unlock()
				_ = c.client.Close()
				_ = c.server.Close()
			})
			return
		}
	}
}

func (c *proxyConn) wait() {
	c.mu.Lock()
	gate := c.gate
	c.mu.Unlock()
	if gate != nil {
		<-gate
	}
}

// Blackhole stops forwarding on every open connection.
func (p *blackholeProxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.mu.Lock()
		if c.gate == nil {
			c.gate = make(chan struct{})
		}
		c.mu.Unlock()
	}
}

// Restore resumes forwarding on every blackholed connection.
func (p *blackholeProxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.mu.Lock()
		if c.gate != nil {
			close(c.gate)
			c.gate = nil
		}
		c.mu.Unlock()
	}
}

// Stats returns how many connections the proxy accepted and how many the target ended.
func (p *blackholeProxy) Stats() (accepted, closedByServer int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted, p.closedByServer
}

func (p *blackholeProxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.lis.Close()
	p.Restore()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.client.Close()
		_ = c.server.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
