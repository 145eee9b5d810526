/*
Copyright The Kubernetes Authors.

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

package useragent

import (
	"fmt"
	"runtime"
	"strings"

	"sigs.k8s.io/jobset/pkg/constants"
	"sigs.k8s.io/jobset/pkg/version"
)

// adjustVersion strips "alpha", "beta", etc. from version in form
// major.minor.patch-[alpha|beta|etc].
func adjustVersion(v string) string {
	if len(v) == 0 {
		return "unknown"
	}
	seg := strings.SplitN(v, "-", 2)
	return seg[0]
}

// adjustCommit returns sufficient significant figures of the commit's git hash.
func adjustCommit(c string) string {
	if len(c) == 0 {
		return "unknown"
	}
	if len(c) > 7 {
		return c[:7]
	}
	return c
}

// Default returns User-Agent string built from static global vars.
func Default() string {
	return fmt.Sprintf("%s/%s (%s/%s) %s",
		constants.JobSetSubsystemName,
		adjustVersion(version.GitVersion),
		runtime.GOOS,
		runtime.GOARCH,
		adjustCommit(version.GitCommit))
}
