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
	"context"

	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
)

// ListEntriesWithSelector returns the entries that carry selector among others (SPIRE's
// MATCH_SUPERSET), paging as ListEntries does. A pod's entries are found so by the pod-UID
// selector without listing the whole server.
func (c *Client) ListEntriesWithSelector(ctx context.Context, selector *types.Selector) ([]*types.Entry, error) {
	filter := &entryv1.ListEntriesRequest_Filter{BySelectors: &types.SelectorMatch{
		Selectors: []*types.Selector{selector},
		Match:     types.SelectorMatch_MATCH_SUPERSET,
	}}
	return listAll(ctx, "ListEntries", "list entries with selector", func(ctx context.Context, token string) ([]*types.Entry, string, error) {
		resp, err := c.entries.ListEntries(ctx, &entryv1.ListEntriesRequest{
			Filter:    filter,
			PageSize:  c.pageSize(),
			PageToken: token,
		})
		return resp.GetEntries(), resp.GetNextPageToken(), err
	})
}
