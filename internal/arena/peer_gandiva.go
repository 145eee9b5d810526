package arena

import (
	"context"
	"fmt"
	"strconv"

	"github.com/gandiva-sched/gandiva/internal/kube"
)

// gandiva:POLICY[@SIMPOLICY]: `gandiva kube` in exclusive mode with any
// registered policy, its pods carrying kube.SchedulerName.
func init() {
	registerPeer("gandiva", &peer{
		parse:         parseGandiva,
		schedulerName: kube.SchedulerName,
		start:         startGandiva,
	})
}

// parseGandiva checks gandiva's policy (default tiresias-l) and the
// simulator's (default the same).
func parseGandiva(pol, simPol string, hasSim bool) (string, string, error) {
	if pol == "" {
		pol = "tiresias-l"
	}
	if err := kube.CheckPolicy(pol); err != nil {
		return "", "", err
	}
	if !hasSim {
		simPol = pol
	}
	if err := kube.CheckPolicy(simPol); err != nil {
		return "", "", fmt.Errorf("the simulator's policy: %w", err)
	}
	return pol, simPol, nil
}

// startGandiva runs the configured `gandiva kube` command with the plane's
// kubeconfig, the policy, its own namespace and its engine's clock at the
// replay's speed (--clock-speed): the policy keeps time in trace seconds,
// as in `gandiva sim`.
func startGandiva(_ context.Context, e *peerEnv) (*group, error) {
	if len(e.Config.Gandiva) == 0 {
		return nil, fmt.Errorf("no command to run gandiva kube")
	}
	argv := append(append([]string(nil), e.Config.Gandiva...), "--kubeconfig="+e.Kubeconfig, "--policy="+e.Sched.Policy, "--namespace=gandiva-system",
		"--clock-speed="+strconv.FormatFloat(e.Config.Speed, 'g', -1, 64))
	g := &group{}
	if _, err := g.startChild(e.Dir, "gandiva", argv); err != nil {
		return nil, err
	}
	return g, nil
}
