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

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"

	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// listEntriesMetric is spire-server's counter of ListEntries RPCs; it has one series per
// status label, which scrapeCounter sums.
const listEntriesMetric = "spire_server_rpc_entry_v1_entry_list_entries"

// rawResult is SPIRE's own write ceiling for n entries.
type rawResult struct {
	create, delete time.Duration
	// createCPU is the CPU spire-server spent during the creates; -1 if unknown.
	createCPU float64
}

// rawThroughput measures, on a fresh SPIRE server, how long a tight client takes to create n
// entries shaped like the controller's (one per pod: SPIFFE ID, node agent parent, pod UID
// selector) in batches of spire.DefaultBatchSize, one RPC after the other, and then to delete
// them the same way.
func rawThroughput(ctx context.Context, n int, logf realcluster.Logf) (rawResult, error) {
	srv, err := realcluster.StartSPIRE(ctx, realcluster.SPIREOptions{Logf: logf})
	if err != nil {
		return rawResult{}, err
	}
	defer func() { _ = srv.Stop() }()
	client, err := spire.Dial(ctx, srv.SocketPath())
	if err != nil {
		return rawResult{}, err
	}
	defer func() { _ = client.Close() }()
	if err := client.WaitReady(ctx); err != nil {
		return rawResult{}, err
	}

	td := srv.TrustDomain()
	// As many agents (nodes) as a controller run has, each the parent of its pods' entries.
	nodes := make([]string, max(1, n/podsPerNode))
	for i := range nodes {
		nodes[i] = rand.Text()
	}
	entries := make([]*spiretypes.Entry, n)
	for i := range entries {
		entries[i] = &spiretypes.Entry{
			SpiffeId:  &spiretypes.SPIFFEID{TrustDomain: td, Path: fmt.Sprintf("/ns/raw/pod/raw-%06d", i)},
			ParentId:  &spiretypes.SPIFFEID{TrustDomain: td, Path: fmt.Sprintf("/spire/agent/k8s_psat/%s/%s", clusterName, nodes[i%len(nodes)])},
			Selectors: []*spiretypes.Selector{{Type: "k8s", Value: podUIDSelector + rand.Text()}},
		}
	}

	var res rawResult
	spireCPU := filepath.Join(srv.Dir(), "server.conf")
	cpuBefore := procCPU(spireCPU)
	start := time.Now()
	created, err := client.CreateEntries(ctx, entries)
	res.create = time.Since(start)
	if cpuAfter := procCPU(spireCPU); cpuBefore >= 0 && cpuAfter >= 0 {
		res.createCPU = cpuAfter - cpuBefore
	} else {
		res.createCPU = -1
	}
	if err != nil {
		return res, fmt.Errorf("raw create: %w", err)
	}
	ids := make([]string, 0, n)
	for i, r := range created {
		if r.Err != nil {
			return res, fmt.Errorf("raw create of entry %d: %w", i, r.Err)
		}
		ids = append(ids, r.Entry.GetId())
	}
	start = time.Now()
	deleted, err := client.DeleteEntries(ctx, ids)
	res.delete = time.Since(start)
	if err != nil {
		return res, fmt.Errorf("raw delete: %w", err)
	}
	for i, r := range deleted {
		if r.Err != nil {
			return res, fmt.Errorf("raw delete of entry %d: %w", i, r.Err)
		}
	}
	return res, nil
}

// scrapeCounter sums every series of the named counter in a Prometheus text exposition.
// Series of other metrics sharing the name as a prefix (name_elapsed_time...) do not count.
func scrapeCounter(ctx context.Context, url, name string) (float64, error) {
	body, err := scrape(ctx, url)
	if err != nil {
		return 0, err
	}
	return sumCounter(body, name)
}

// scrape returns a Prometheus text exposition.
func scrape(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: HTTP %d", url, resp.StatusCode)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	return body, nil
}

func sumCounter(exposition []byte, name string) (float64, error) {
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(exposition))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (!strings.HasPrefix(rest, "{") && !strings.HasPrefix(rest, " ")) {
			continue
		}
		fields := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
		if len(fields) == 0 {
			return 0, fmt.Errorf("malformed series %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("malformed series %q: %w", line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}

// cpuSeconds is the user plus system CPU time the whole bench process has used: the
// controller runs in-process, so this is its CPU plus the bench's own (pod creation and
// polling, whose share is small next to the controller's informers and syncs).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// peakRSS is the process's peak resident set size (ru_maxrss, kilobytes on Linux). It never
// goes down, so with several runs it is the peak of all runs so far.
func peakRSS() uint64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return uint64(ru.Maxrss) * 1024
}

// memSnapshot is the process's memory after a GC that also returns freed memory to the OS,
// so that RSS follows the live heap and two snapshots can be subtracted.
type memSnapshot struct {
	rss       uint64 // VmRSS from /proc/self/status; 0 where unavailable
	heapInuse uint64
}

func takeMemSnapshot() memSnapshot {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSnapshot{rss: currentRSS(), heapInuse: ms.HeapInuse}
}

// currentRSS reads VmRSS, the resident set size now, which ru_maxrss cannot give.
func currentRSS() uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			fields := strings.Fields(rest)
			if len(fields) >= 1 {
				kb, err := strconv.ParseUint(fields[0], 10, 64)
				if err == nil {
					return kb * 1024
				}
			}
		}
	}
	return 0
}

// perPod is the growth from before to after divided by the pods, or -1 when unmeasurable.
func perPod(before, after uint64, pods int) float64 {
	if before == 0 || after == 0 || pods == 0 {
		return -1
	}
	return (float64(after) - float64(before)) / float64(pods)
}

// percentiles returns the nearest-rank p-th percentiles of ds.
func percentiles(ds []time.Duration, ps ...float64) []time.Duration {
	if len(ds) == 0 {
		return make([]time.Duration, len(ps))
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	out := make([]time.Duration, len(ps))
	for i, p := range ps {
		rank := int(p/100*float64(len(s))+0.999999) - 1
		out[i] = s[min(max(rank, 0), len(s)-1)]
	}
	return out
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// procCPU returns the CPU seconds (user plus system) used so far by the processes whose
// command line contains match, found in /proc: the real components run as child processes,
// and their share is where the time goes when the controller is far from SPIRE's ceiling.
// It returns -1 when /proc cannot tell.
func procCPU(match string) float64 {
	return sumProcCPU(match, false)
}

// procTreeCPU is procCPU with the matching processes' descendants: PostgreSQL serves each
// connection from a child process whose command line does not say which cluster it is of.
func procTreeCPU(match string) float64 {
	return sumProcCPU(match, true)
}

// procStat is what sumProcCPU reads of one process.
type procStat struct {
	ppid    int
	cpu     float64
	matches bool
}

func sumProcCPU(match string, descendants bool) float64 {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return -1
	}
	procs := map[int]procStat{}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		matches := strings.Contains(string(cmdline), match)
		if !matches && !descendants {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name, field 2, is parenthesised and may contain spaces: count
		// fields from the last ')'. ppid is field 4, utime and stime are fields 14 and 15.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 13 {
			continue
		}
		ppid, err0 := strconv.Atoi(fields[1])
		utime, err1 := strconv.ParseUint(fields[11], 10, 64)
		stime, err2 := strconv.ParseUint(fields[12], 10, 64)
		if err0 != nil || err1 != nil || err2 != nil {
			continue
		}
		procs[pid] = procStat{ppid: ppid, cpu: float64(utime+stime) / clockTicks, matches: matches}
	}
	total, found := 0.0, false
	for pid, p := range procs {
		if counts(procs, pid, descendants) {
			total += p.cpu
			found = true
		}
	}
	if !found {
		return -1
	}
	return total
}

// counts says whether a process matches or, with descendants, has an ancestor that does.
func counts(procs map[int]procStat, pid int, descendants bool) bool {
	for hops := 0; hops < 64; hops++ {
		p, ok := procs[pid]
		if !ok {
			return false
		}
		if p.matches {
			return true
		}
		if !descendants {
			return false
		}
		pid = p.ppid
	}
	return false
}

// cpuSample is the CPU used so far by the bench process and each real component.
type cpuSample struct {
	self, spire, apiserver, etcd float64
}

// sampleCPU reads every process's CPU. spireDir and kubeDir identify the processes: they
// appear in their command lines (config path, cert and data directories).
func sampleCPU(spireDir, kubeDir string) cpuSample {
	return cpuSample{
		self:      cpuSeconds(),
		spire:     procCPU(filepath.Join(spireDir, "server.conf")),
		apiserver: procCPU("--cert-dir=" + filepath.Join(kubeDir, "pki")),
		etcd:      procCPU("--data-dir=" + filepath.Join(kubeDir, "etcd-data")),
	}
}

// sub is the CPU used between two samples; components unknown in either are -1.
func (s cpuSample) sub(before cpuSample) cpuSample {
	d := func(a, b float64) float64 {
		if a < 0 || b < 0 {
			return -1
		}
		return a - b
	}
	return cpuSample{self: s.self - before.self, spire: d(s.spire, before.spire),
		apiserver: d(s.apiserver, before.apiserver), etcd: d(s.etcd, before.etcd)}
}
