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

package entry

import (
	"bytes"
	"errors"
	"fmt"
	"text/template"

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

// parseTemplate parses a template with the functions of plain text/template only.
func parseTemplate(name, text string) (*template.Template, error) {
	t, err := template.New(name).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", name, err)
	}
	return t, nil
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
