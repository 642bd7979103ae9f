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
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Modules whose files the harness reads at run time from the Go module
// cache, rather than copying them into this repository. Their versions match
// the pins under hack/tools.
const (
	// KwokModule holds kwok's stock stages under kustomize/stage.
	KwokModule = "sigs.k8s.io/kwok@v0.8.0"
	// SCMModule holds spire-controller-manager's CRDs under config/crd/bases.
	SCMModule = "github.com/spiffe/spire-controller-manager@v0.7.0"
)

const moduleDownloadTimeout = 5 * time.Minute

var moduleDirs sync.Map // module@version -> directory

// ModuleDir returns the directory of module@version in the Go module cache,
// downloading the module first if it is not there (`go mod download -json`).
func ModuleDir(ctx context.Context, moduleAtVersion string) (string, error) {
	if dir, ok := moduleDirs.Load(moduleAtVersion); ok {
		return dir.(string), nil
	}
	ctx, cancel := context.WithTimeout(ctx, moduleDownloadTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", moduleAtVersion)
	// Outside any module, so that this repository's go.mod plays no part.
	cmd.Dir = os.TempDir()
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	runErr := cmd.Run()
	// On failure go still prints the JSON, with the reason in Error.
	var info struct {
		Dir   string
		Error string
	}
	if err := json.Unmarshal(stdout.Bytes(), &info); err != nil && runErr == nil {
		return "", fmt.Errorf("decode go mod download output for %s: %w", moduleAtVersion, err)
	}
	if runErr != nil || info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %v %s %s", moduleAtVersion, runErr, info.Error, strings.TrimSpace(stderr.String()))
	}
	moduleDirs.Store(moduleAtVersion, info.Dir)
	return info.Dir, nil
}
