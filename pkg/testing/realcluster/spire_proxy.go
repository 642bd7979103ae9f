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
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	// The proxy decodes only messages whose types are registered; the entry service's
	// are, through this import, so that DropAdditionalAttributes always has them.
	_ "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// SPIREProxy serves the SPIRE server API on a unix socket of its own and forwards every call,
// of any service and any kind of stream, to a running server's socket. Each request and
// response message whose type is registered with the protobuf runtime is handed to a rewrite
// function on the way, so that a real server can be made to answer as another version would:
// with DropAdditionalAttributes, SPIRE 1.15 answers as a server that predates that field.
// Building and running the other version instead costs minutes of compiling for what is, on
// the wire, a few fields.
type SPIREProxy struct {
	dir        string
	socketPath string
	conn       *grpc.ClientConn
	server     *grpc.Server
	rewrite    func(proto.Message)
}

// NewSPIREProxy starts a proxy in front of the server listening on target, a unix socket
// path, and stops it when the test ends. rewrite may be nil: the proxy then passes every
// message through unchanged.
func NewSPIREProxy(t testing.TB, target string, rewrite func(proto.Message)) *SPIREProxy {
	t.Helper()
	p, err := StartSPIREProxy(target, rewrite)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// StartSPIREProxy starts a proxy as NewSPIREProxy does; the caller must call Stop.
func StartSPIREProxy(target string, rewrite func(proto.Message)) (*SPIREProxy, error) {
	// os.MkdirTemp("", ...) rather than a test's TempDir: short enough for the socket.
	dir, err := os.MkdirTemp("", "spire-proxy-")
	if err != nil {
		return nil, err
	}
	p := &SPIREProxy{dir: dir, socketPath: filepath.Join(dir, "api.sock"), rewrite: rewrite}
	p.conn, err = grpc.NewClient("unix://"+target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("spire proxy: client of %s: %w", target, err)
	}
	lis, err := net.Listen("unix", p.socketPath)
	if err != nil {
		_ = p.conn.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("spire proxy: %w", err)
	}
	// No service is registered: every call is the unknown-service handler's to forward.
	p.server = grpc.NewServer(grpc.UnknownServiceHandler(p.forward), grpc.ForceServerCodec(rawCodec{}))
	go func() { _ = p.server.Serve(lis) }()
	return p, nil
}

// SocketPath is the unix socket the proxy serves the API on.
func (p *SPIREProxy) SocketPath() string { return p.socketPath }

// Stop ends every call in flight, stops serving and removes the socket.
func (p *SPIREProxy) Stop() {
	p.server.Stop()
	_ = p.conn.Close()
	_ = os.RemoveAll(p.dir)
}

// forward relays one call of any kind (unary or streaming) to the server: requests one way,
// responses, headers and the final status the other.
func (p *SPIREProxy) forward(_ any, in grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(in)
	reqType, respType := messageTypes(method)
	ctx, cancel := context.WithCancel(in.Context())
	defer cancel()
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		ctx = metadata.NewOutgoingContext(ctx, md.Copy())
	}
	out, err := p.conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, method)
	if err != nil {
		return err
	}

	// Requests: until the client half-closes. A request that cannot be rewritten ends the
	// call with its error, which the response loop below returns once cancel ends the
	// upstream call.
	reqErr := make(chan error, 1)
	go func() {
		for {
			var m rawMessage
			if err := in.RecvMsg(&m); err != nil {
				_ = out.CloseSend()
				return
			}
			if err := p.rewriteRaw(reqType, &m); err != nil {
				reqErr <- err
				cancel()
				return
			}
			if err := out.SendMsg(&m); err != nil {
				// The upstream call is over; RecvMsg below reports why.
				return
			}
		}
	}()

	for first := true; ; first = false {
		var m rawMessage
		if err := out.RecvMsg(&m); err != nil {
			in.SetTrailer(out.Trailer())
			select {
			case err := <-reqErr:
				return err
			default:
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if first {
			if md, err := out.Header(); err == nil {
				_ = in.SendHeader(md)
			}
		}
		if err := p.rewriteRaw(respType, &m); err != nil {
			return err
		}
		if err := in.SendMsg(&m); err != nil {
			return err
		}
	}
}

// rewriteRaw decodes m as a message of type mt, hands it to the rewrite function and encodes
// it again. Messages of a type not registered (mt nil) pass unchanged.
func (p *SPIREProxy) rewriteRaw(mt protoreflect.MessageType, m *rawMessage) error {
	if p.rewrite == nil || mt == nil {
		return nil
	}
	msg := mt.New().Interface()
	if err := proto.Unmarshal(m.data, msg); err != nil {
		return status.Errorf(codes.Internal, "spire proxy: decode %s: %v", mt.Descriptor().FullName(), err)
	}
	p.rewrite(msg)
	data, err := proto.Marshal(msg)
	if err != nil {
		return status.Errorf(codes.Internal, "spire proxy: encode %s: %v", mt.Descriptor().FullName(), err)
	}
	m.data = data
	return nil
}

// messageTypes returns the request and response types of a gRPC method named
// "/package.Service/Method", or nils when the method is not registered.
func messageTypes(method string) (req, resp protoreflect.MessageType) {
	service, name, ok := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	if !ok {
		return nil, nil
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		return nil, nil
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, nil
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return nil, nil
	}
	req, _ = protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	resp, _ = protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	return req, resp
}

// rawMessage is a message as its bytes on the wire.
type rawMessage struct {
	data []byte
}

// rawCodec moves messages as bytes, undecoded: what the proxy does not rewrite it forwards
// exactly as it came, whatever its service.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	m, ok := v.(*rawMessage)
	if !ok {
		return nil, fmt.Errorf("spire proxy: cannot encode %T", v)
	}
	return m.data, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	m, ok := v.(*rawMessage)
	if !ok {
		return fmt.Errorf("spire proxy: cannot decode into %T", v)
	}
	// gRPC reuses data's buffer once Unmarshal returns.
	m.data = bytes.Clone(data)
	return nil
}

func (rawCodec) Name() string { return "proto" }

// additionalAttributes is the field SPIRE 1.15's entry API has and older ones do not (field
// 16 of both Entry and EntryMask), keyed by the message that has it.
var additionalAttributes = fieldsByMessage("additional_attributes", &types.Entry{}, &types.EntryMask{})

func fieldsByMessage(field protoreflect.Name, msgs ...proto.Message) map[protoreflect.FullName]protoreflect.FieldDescriptor {
	out := map[protoreflect.FullName]protoreflect.FieldDescriptor{}
	for _, m := range msgs {
		d := m.ProtoReflect().Descriptor()
		out[d.FullName()] = d.Fields().ByName(field)
	}
	return out
}

// DropAdditionalAttributes is a rewrite for SPIREProxy that makes a SPIRE 1.15 server's entry
// API answer as a server whose API predates additional_attributes (1.13 and before). It
// clears the field from every Entry and EntryMask anywhere in a message. Going in, that is
// what such a server does with a field it does not know, as proto3 parsers do: it ignores an
// Entry's attributes and a mask's bit for them (a mask naming only them changes nothing);
// coming out, such a server never sends them.
func DropAdditionalAttributes(msg proto.Message) {
	dropAdditionalAttributes(msg.ProtoReflect())
}

func dropAdditionalAttributes(m protoreflect.Message) {
	if fd := additionalAttributes[m.Descriptor().FullName()]; fd != nil {
		m.Clear(fd)
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i, list := 0, v.List(); i < list.Len(); i++ {
				dropAdditionalAttributes(list.Get(i).Message())
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, v protoreflect.Value) bool {
				dropAdditionalAttributes(v.Message())
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			dropAdditionalAttributes(v.Message())
		}
		return true
	})
}
