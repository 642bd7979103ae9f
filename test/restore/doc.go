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

// Package restore proves what spire-registrar does when SPIRE's datastore is restored from an
// older backup while the controller keeps running: the spire-registrar binary, a real
// kube-apiserver and a real spire-server, on sqlite and on PostgreSQL, the backup a copy of
// the sqlite files or a pg_dump archive. Within seconds of SPIRE's return it again holds
// exactly what the cluster declares: the identities of pods deleted since the backup are
// gone, those of pods created since are back, federation relationships too, and nothing that
// was right is rewritten.
//
// It also proves what a long outage costs: SPIRE killed for five minutes while pods come and
// go, the keys that wait for it neither retried nor dropped, the process's memory flat, /readyz
// and the metrics saying what waits, and on SPIRE's return exactly the writes the outage
// called for, without a storm of calls.
//
// The tests start real binaries and are skipped with -short. Run them with
//
//	go test -count=1 -v -run TestSPIRERestoredFromAnOlderBackup ./test/restore/
//	go test -count=1 -v -run TestSPIREDownForLongWithWorkWaiting ./test/restore/
//
// The second takes six minutes; SPIRE_REGISTRAR_OUTAGE=40s shortens its outage when iterating.
package restore
