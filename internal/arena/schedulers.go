package arena

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
)

// Scheduler names one scheduler under test: "kube-scheduler", or
// "gandiva:POLICY" (any registered policy with its parameters, as for
// `gandiva sim --policy`; "gandiva" alone is "gandiva:tiresias-l"),
// optionally followed by "@SIMPOLICY", the policy the simulator runs to
// compare (default POLICY): the arena's policy keeps time in wall seconds,
// so its time constants divided by the speed correspond to the
// simulator's undivided ones ("gandiva:tiresias-l:limits=162.5/360@tiresias-l"
// at speed 20).
type Scheduler struct {
	// Kind is "gandiva" or "kube-scheduler".
	Kind string
	// Policy is gandiva's policy ("" for kube-scheduler).
	Policy string
	// SimPolicy is the simulator's policy to compare with ("" for
	// kube-scheduler).
	SimPolicy string
}

// ParseSchedulers reads a comma-separated list of schedulers.
func ParseSchedulers(s string) ([]Scheduler, error) {
	var out []Scheduler
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		f, simPol, hasSim := strings.Cut(f, "@")
		kind, pol, _ := strings.Cut(f, ":")
		switch kind {
		case "kube-scheduler":
			if pol != "" || hasSim {
				return nil, fmt.Errorf("scheduler %q: kube-scheduler takes no policy", f)
			}
		case "gandiva":
			if pol == "" {
				pol = "tiresias-l"
			}
			if err := kube.CheckPolicy(pol); err != nil {
				return nil, fmt.Errorf("scheduler %q: %w", f, err)
			}
			if !hasSim {
				simPol = pol
			}
			if err := kube.CheckPolicy(simPol); err != nil {
				return nil, fmt.Errorf("scheduler %q: the simulator's policy: %w", f, err)
			}
		default:
			return nil, fmt.Errorf("scheduler %q: use gandiva:POLICY or kube-scheduler", f)
		}
		out = append(out, Scheduler{Kind: kind, Policy: pol, SimPolicy: simPol})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no scheduler named")
	}
	return out, nil
}

// String is the scheduler as ParseSchedulers reads it.
func (s Scheduler) String() string {
	switch {
	case s.Kind != "gandiva":
		return s.Kind
	case s.SimPolicy != "" && s.SimPolicy != s.Policy:
		return "gandiva:" + s.Policy + "@" + s.SimPolicy
	}
	return "gandiva:" + s.Policy
}

// schedulerName is the schedulerName of the pods this scheduler binds.
func (s Scheduler) schedulerName() string {
	if s.Kind == "gandiva" {
		return kube.SchedulerName
	}
	return "default-scheduler"
}

// Usage is a scheduler process's resources, from its rusage once it ended.
type Usage struct {
	CPUSeconds float64 `json:"cpu_s"`
	PeakRSSMiB float64 `json:"peak_rss_mib"`
}

// kubeSchedulerConfig is kube-scheduler's configuration (kubeconfig, QPS,
// burst): the default profile, with GPUs bin-packed (NodeResourcesFit
// scoring MostAllocated on nvidia.com/gpu, as Kubernetes' "Resource Bin
// Packing" page suggests for extended resources such as GPUs) so that
// small jobs do not fragment the servers larger gangs need. Pods of equal
// priority (the arena sets none) leave its queue in the order they entered
// it: FIFO by creation.
const kubeSchedulerConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
  qps: %g
  burst: %d
leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources:
        - name: nvidia.com/gpu
          weight: 1
`

// child is a scheduler running as a child process.
type child struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// startScheduler starts s as a child process against p's API server, its
// output in dir/NAME.log. gandiva is the command that runs `gandiva kube`
// (argv; --kubeconfig, --policy and --namespace are appended).
func startScheduler(p *cplane.Plane, s Scheduler, gandiva []string, binDir, dir string, qps float64) (*child, error) {
	kc := filepath.Join(dir, "scheduler.kubeconfig")
	if err := p.WriteKubeconfig(kc, "admin"); err != nil {
		return nil, err
	}
	var argv []string
	switch s.Kind {
	case "gandiva":
		if len(gandiva) == 0 {
			return nil, fmt.Errorf("no command to run gandiva kube")
		}
		argv = append(append(argv, gandiva...), "--kubeconfig="+kc, "--policy="+s.Policy, "--namespace=gandiva-system")
	case "kube-scheduler":
		conf := filepath.Join(dir, "kube-scheduler.yaml")
		cfg := fmt.Sprintf(kubeSchedulerConfig, kc, qps, int(2*qps))
		if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
			return nil, err
		}
		argv = []string{filepath.Join(binDir, "kube-scheduler"), "--config=" + conf, "--secure-port=0", "-v=1"}
	default:
		return nil, fmt.Errorf("unknown scheduler %q", s.Kind)
	}
	logPath := filepath.Join(dir, strings.ReplaceAll(s.Kind, "/", "_")+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", s, err)
	}
	c := &child{cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { cmd.Wait(); close(c.done) }()
	return c, nil
}

// exited reports whether the process ended (on its own or stopped).
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop ends the process (SIGTERM, SIGKILL after 10 s) and returns its
// CPU time and peak resident memory.
func (c *child) stop() Usage {
	if !c.exited() {
		c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			c.cmd.Process.Kill()
			<-c.done
		}
	}
	st := c.cmd.ProcessState
	if st == nil {
		return Usage{}
	}
	u := Usage{CPUSeconds: (st.UserTime() + st.SystemTime()).Seconds()}
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		u.PeakRSSMiB = float64(ru.Maxrss) / 1024 // KiB on Linux
	}
	return u
}

// tail is the last n lines of the process's log.
func (c *child) tail(n int) string {
	data, err := os.ReadFile(c.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
