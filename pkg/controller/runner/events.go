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

package runner

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	spirescheme "github.com/spire-registrar/spire-registrar/generated/clientset/versioned/scheme"
)

func init() {
	// Events about our kinds need them in the scheme the recorder uses.
	utilruntime.Must(spirescheme.AddToScheme(scheme.Scheme))
}

// Events is a controller's event broadcaster and recorder. Events go to the API and, at V(3),
// to the log; when they are only logged, they are logged at the default level, since the log
// is then the only place to read them.
type Events struct {
	// Recorder records Events about the controller's objects.
	Recorder record.EventRecorder

	broadcaster record.EventBroadcaster
	sink        record.EventSink
}

// NewEvents makes the Events of a component. Events are only logged, never sent to the API,
// when kubeClient is nil (static mode, where the objects are files) or onlyLog is set (a dry
// run, which writes nothing anywhere). Nothing is sent or logged before Start.
func NewEvents(ctx context.Context, component string, kubeClient clientset.Interface, onlyLog bool) *Events {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	e := &Events{
		Recorder:    broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component}),
		broadcaster: broadcaster,
	}
	if kubeClient != nil && !onlyLog {
		e.sink = &typedcorev1.EventSinkImpl{Interface: kubeClient.CoreV1().Events("")}
	}
	return e
}

// Start begins logging, and unless they are only logged, recording Events to the API.
func (e *Events) Start() {
	if e.sink == nil {
		e.broadcaster.StartStructuredLogging(0)
		return
	}
	e.broadcaster.StartStructuredLogging(3)
	e.broadcaster.StartRecordingToSink(e.sink)
}

// Shutdown stops the broadcaster once the Events queued so far are handed out.
func (e *Events) Shutdown() {
	e.broadcaster.Shutdown()
}

// Truncate shortens a message put in an Event or a condition to at most n bytes and an
// ellipsis, cutting no character in half: error texts from SPIRE can be long enough to make
// the API refuse the object, or flood whoever reads it.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
