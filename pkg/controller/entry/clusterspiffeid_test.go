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
	"fmt"
	"testing"
	"time"
)

// TestStatusPacingBoundsTheShareOfStatusSyncs checks that counter changes wait the usual
// second while counting is cheap, and long enough for all counting to stay within its share
// of a core when it is not.
func TestStatusPacingBoundsTheShareOfStatusSyncs(t *testing.T) {
	p := newClusterSPIFFEIDStatus(nil)
	if got := p.delay(); got != statusDelay {
		t.Fatalf("delay with nothing counted yet = %v, want %v", got, statusDelay)
	}
	for i := range 10 {
		p.observe(fmt.Sprintf("cheap-%d", i), time.Millisecond)
	}
	if got := p.delay(); got != statusDelay {
		t.Errorf("delay after ten counts of 1ms = %v, want %v", got, statusDelay)
	}
	for i := range 10 {
		p.observe(fmt.Sprintf("cheap-%d", i), 30*time.Millisecond)
	}
	// 300ms of counting in all may take 5% of the wait.
	if got, want := p.delay(), 6*time.Second; got != want {
		t.Errorf("delay after ten counts of 30ms = %v, want %v", got, want)
	}
	for i := range 5 {
		p.forget(fmt.Sprintf("cheap-%d", i))
	}
	if got, want := p.delay(), 3*time.Second; got != want {
		t.Errorf("delay once five are forgotten = %v, want %v", got, want)
	}
}
