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

import "slices"

// SortByPreference orders ClusterSPIFFEIDs most preferred first, by Declarer.Compare: the order
// the entry controller renders a pod's entries in, and the one explain shows.
func SortByPreference(clusterSPIFFEIDs []*ClusterSPIFFEID) {
	slices.SortFunc(clusterSPIFFEIDs, func(a, b *ClusterSPIFFEID) int { return a.Declarer("").Compare(b.Declarer("")) })
}
