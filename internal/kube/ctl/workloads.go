package ctl

import (
	"fmt"
	"sort"
	"strings"
)

// workloads are the names `gandiva kube dev --workloads` takes: the
// workload kinds, each with the controllers that run it.
var workloads = map[string]string{
	"jobset":  JobSet,
	"trainer": Trainer,
	"lws":     LWS,
	"ray":     KubeRay,
	"pytorch": PyTorch,
}

// Workloads parses a list of workload kinds, comma-separated (jobset,
// trainer, lws, ray, pytorch, or all of them: all), into the controllers that run
// them, sorted and each once; "" is none.
func Workloads(list string) ([]string, error) {
	seen := map[string]bool{}
	for _, w := range strings.Split(list, ",") {
		w = strings.TrimSpace(w)
		switch c, ok := workloads[w]; {
		case w == "":
		case w == "all":
			for _, c := range workloads {
				seen[c] = true
			}
		case ok:
			seen[c] = true
		default:
			return nil, fmt.Errorf("--workloads: %q is no workload kind; want a comma-separated list of jobset, trainer, lws, ray, pytorch, or all", w)
		}
	}
	out := make([]string, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Strings(out)
	return out, nil
}
