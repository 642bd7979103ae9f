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

package render

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"text/template"
	"text/template/parse"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxRenderedBytes bounds what one template may produce. A SPIFFE ID is at most 2048 bytes
// and every other rendered value is far shorter; whoever writes a ClusterSPIFFEID must not be
// able to make the controller build unbounded strings.
const maxRenderedBytes = 2048

// templateData is what ClusterSPIFFEID templates and parentIDTemplate can refer to. The names
// are spire-controller-manager's, so existing templates render the same.
type templateData struct {
	TrustDomain   string
	ClusterName   string
	ClusterDomain string
	PodMeta       *metav1.ObjectMeta
	PodSpec       *corev1.PodSpec
	NodeMeta      *metav1.ObjectMeta
	NodeSpec      *corev1.NodeSpec
}

// parseTemplate parses a template and checks that it only uses what entry templates need:
// fields, index, if/with/else and the printing functions. Templates are a trust boundary:
// whoever can write a ClusterSPIFFEID must not be able to make the controller loop (range,
// recursive template calls) or build values without bound (variables fed back into printf),
// so those constructs are refused when the ClusterSPIFFEID is compiled, before any pod is
// rendered.
func parseTemplate(name, text string) (*template.Template, error) {
	t, err := template.New(name).Funcs(template.FuncMap{"printf": boundedPrintf}).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", name, err)
	}
	if len(t.Templates()) > 1 {
		return nil, fmt.Errorf("parsing %s: define and block are not allowed", name)
	}
	if err := checkNodes(t.Root); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", name, err)
	}
	return t, nil
}

// checkNodes refuses the template constructs that can loop or grow values.
func checkNodes(node parse.Node) error {
	switch n := node.(type) {
	case nil:
		return nil
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := checkNodes(c); err != nil {
				return err
			}
		}
	case *parse.ActionNode:
		return checkPipe(n.Pipe)
	case *parse.IfNode:
		return checkBranch(&n.BranchNode)
	case *parse.WithNode:
		return checkBranch(&n.BranchNode)
	case *parse.RangeNode:
		return errors.New("range is not allowed")
	case *parse.TemplateNode:
		return errors.New("template calls are not allowed")
	case *parse.TextNode, *parse.CommentNode:
	default:
		return fmt.Errorf("%s is not allowed", node)
	}
	return nil
}

func checkBranch(b *parse.BranchNode) error {
	if err := checkPipe(b.Pipe); err != nil {
		return err
	}
	if err := checkNodes(b.List); err != nil {
		return err
	}
	return checkNodes(b.ElseList)
}

func checkPipe(p *parse.PipeNode) error {
	if p == nil {
		return nil
	}
	if len(p.Decl) > 0 {
		return errors.New("variables are not allowed")
	}
	for _, cmd := range p.Cmds {
		for _, arg := range cmd.Args {
			switch a := arg.(type) {
			case *parse.PipeNode:
				if err := checkPipe(a); err != nil {
					return err
				}
			case *parse.VariableNode:
				if a.Ident[0] != "$" {
					return errors.New("variables are not allowed")
				}
			}
		}
	}
	return nil
}

// printfWidth finds the width and precision of printf verbs.
var printfWidth = regexp.MustCompile(`%[-+# 0]*(\*|\d*)(?:\.(\*|\d*))?`)

// boundedPrintf is fmt.Sprintf with widths and precisions of at most two digits, so that a
// format such as "%0999999999d" cannot allocate a gigabyte.
func boundedPrintf(format string, args ...any) (string, error) {
	for _, m := range printfWidth.FindAllStringSubmatch(format, -1) {
		for _, n := range m[1:] {
			if n == "*" || len(n) > 2 {
				return "", fmt.Errorf("printf width or precision %q too large", m[0])
			}
		}
	}
	return fmt.Sprintf(format, args...), nil
}

// errOutputTooLong is returned when a template produces more than maxRenderedBytes.
var errOutputTooLong = fmt.Errorf("output longer than %d bytes", maxRenderedBytes)

// boundedBuffer fails writes past maxRenderedBytes, which stops template execution early.
type boundedBuffer struct {
	bytes.Buffer
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > maxRenderedBytes {
		return 0, errOutputTooLong
	}
	return b.Buffer.Write(p)
}

// execute renders t over data.
func execute(t *template.Template, data *templateData) (string, error) {
	var out boundedBuffer
	if err := t.Execute(&out, data); err != nil {
		if errors.Is(err, errOutputTooLong) {
			return "", fmt.Errorf("rendering %s: %w", t.Name(), errOutputTooLong)
		}
		return "", fmt.Errorf("rendering %s: %w", t.Name(), err)
	}
	return out.String(), nil
}
