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
	"k8s.io/client-go/tools/cache"
)

// AddIndexers adds to an informer the indexes it does not have yet. Controllers sharing an
// informer, such as two instances of different classes in one binary, register the same
// index under the same name; the first registration serves them all, where AddIndexers of
// client-go would refuse the second.
func AddIndexers(informer cache.SharedIndexInformer, indexers cache.Indexers) error {
	existing := informer.GetIndexer().GetIndexers()
	missing := cache.Indexers{}
	for name, fn := range indexers {
		if _, ok := existing[name]; !ok {
			missing[name] = fn
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return informer.AddIndexers(missing)
}
