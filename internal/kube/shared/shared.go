// Package shared is the contract between `gandiva kube` and `gandiva agent
// --kube` in shared mode (Gandiva's time-slicing and packing in place):
// the pod annotations through which the scheduler tells a node's agent what
// a job's pod should be doing, and through which the agent says what it is
// doing. Both sides import it; nothing else couples them.
//
// A shared job's pod asks for no nvidia.com/gpu; it carries
// gandiva.io/gpus: N (AnnGPUs) and is bound by Gandiva to a node whose GPUs a
// reservation pod holds for Gandiva. Before it binds the pod, the scheduler
// writes AnnAssign: the generation, the node-local GPU indices and whether
// the job should run or be suspended. The kubelet starts the pod's
// container; its in-job client dials the agent's Unix socket for that pod
// (EnvSocket), says hello naming the pod (EnvPodUID and friends, from the
// downward API), and is told its GPUs (CUDA_VISIBLE_DEVICES) before the
// framework starts. From then on the agent carries out every new
// generation of AnnAssign (suspend at a mini-batch boundary, state kept in
// host memory; resume on the same GPUs) and publishes AnnStatus: the last
// generation it carried out, the state, progress. A change of GPUs is not
// an assignment: the scheduler moves a job by ending its pod (checkpoint on
// SIGTERM) and binding the new one, as in exclusive mode.
package shared

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Annotation keys.
const (
	// AnnGPUs on a pod (or a Job's pod template) asks for N GPUs of a
	// shared node per pod, instead of nvidia.com/gpu.
	AnnGPUs = "gandiva.io/gpus"
	// AnnAssign is written by the scheduler only: an Assign in JSON.
	AnnAssign = "gandiva.io/assign"
	// AnnStatus is written by the node's agent only: a Status in JSON.
	AnnStatus = "gandiva.io/agent-status"
	// LabelReservation marks the reservation pods that hold a shared
	// node's GPUs for Gandiva; its value is the node's name.
	LabelReservation = "gandiva.io/reservation"
	// LabelSharedNode on a Node makes it a shared node (value "true").
	LabelSharedNode = "gandiva.io/shared"
	// SchedulerName is the spec.schedulerName of the pods Gandiva
	// schedules; a shared pod of another scheduler is not Gandiva's.
	SchedulerName = "gandiva"
)

// Environment of a shared job's container (set in the pod spec; see
// deploy/examples/shared-job.yaml).
const (
	// EnvSocket is the path of the agent's Unix socket for this pod. The
	// agent listens on <socket dir>/<pod UID>/agent.sock; the pod mounts
	// only its own <pod UID> directory (hostPath with subPathExpr).
	EnvSocket = "GANDIVA_AGENT_SOCKET"
	// EnvPodUID, EnvPodName and EnvPodNamespace name the pod in the hello
	// (downward API: metadata.uid, metadata.name, metadata.namespace).
	EnvPodUID       = "GANDIVA_POD_UID"
	EnvPodName      = "GANDIVA_POD_NAME"
	EnvPodNamespace = "GANDIVA_POD_NAMESPACE"
)

// SocketName is the socket's file name inside a pod's directory.
const SocketName = "agent.sock"

// Run states of an Assign.
const (
	Running   = "running"
	Suspended = "suspended"
)

// States of a Status.
const (
	// Starting: the pod is bound, its process has not yet reached its
	// first mini-batch boundary (or has not said hello).
	Starting = "starting"
	// StatusRunning and StatusSuspended: the assignment's state is
	// carried out.
	StatusRunning   = Running
	StatusSuspended = Suspended
	// Failed: the agent cannot carry out the assignment (Error says why);
	// the scheduler treats the pod as lost and moves the job.
	Failed = "failed"
)

// Assign is what the scheduler wants of one pod. Gen grows with every
// change; the agent ignores a generation not newer than the one it carried
// out.
type Assign struct {
	Gen   int64  `json:"gen"`
	State string `json:"state"`
	GPUs  []int  `json:"gpus"`
}

// Status is what the agent last did for one pod.
type Status struct {
	// Gen is the generation of the last Assign carried out (0: none yet).
	Gen   int64  `json:"gen"`
	State string `json:"state"`
	GPUs  []int  `json:"gpus,omitempty"`
	// Done is the mini-batches done so far; IterTime the mean seconds per
	// mini-batch over the last report interval (0: not measured).
	Done     int64   `json:"done"`
	IterTime float64 `json:"iter_time,omitempty"`
	// Ready says the process passed its first mini-batch boundary (its
	// start-up is over).
	Ready bool `json:"ready,omitempty"`
	// Error explains Failed.
	Error string `json:"error,omitempty"`
	// At is when the agent wrote this.
	At time.Time `json:"at"`
}

// Validate checks an Assign and names the bad field.
func (a Assign) Validate() error {
	switch {
	case a.Gen <= 0:
		return fmt.Errorf("gen: must be positive, got %d", a.Gen)
	case a.State != Running && a.State != Suspended:
		return fmt.Errorf("state: must be %q or %q, got %q", Running, Suspended, a.State)
	case len(a.GPUs) == 0:
		return errors.New("gpus: at least one GPU")
	}
	return checkGPUs(a.GPUs)
}

// Validate checks a Status and names the bad field.
func (s Status) Validate() error {
	switch {
	case s.Gen < 0:
		return fmt.Errorf("gen: must not be negative, got %d", s.Gen)
	case s.State != Starting && s.State != StatusRunning && s.State != StatusSuspended && s.State != Failed:
		return fmt.Errorf("state: unknown %q", s.State)
	case s.Done < 0:
		return fmt.Errorf("done: must not be negative, got %d", s.Done)
	case s.IterTime < 0 || s.IterTime != s.IterTime:
		return fmt.Errorf("iter_time: must be a non-negative number, got %v", s.IterTime)
	}
	return checkGPUs(s.GPUs)
}

func checkGPUs(g []int) error {
	for i, x := range g {
		if x < 0 || x > 1023 {
			return fmt.Errorf("gpus[%d]: %d is not a GPU index", i, x)
		}
		if i > 0 && g[i-1] >= x {
			return fmt.Errorf("gpus: must be increasing, got %v", g)
		}
	}
	return nil
}

// ForPod checks that a valid a is an assignment Gandiva's scheduler could
// have written for a pod whose AnnGPUs value is gpus: as many GPUs as the
// pod asks for. An assignment that fails it was not written by the
// scheduler, and neither the scheduler nor the node agent acts on it.
func (a Assign) ForPod(gpus string) error {
	n, err := ParseGPUs(gpus)
	if err != nil {
		return fmt.Errorf("annotation %s: the pod's %w", AnnAssign, err)
	}
	if len(a.GPUs) != n {
		return fmt.Errorf("annotation %s: gpus: %d GPUs %v, but the pod asks for %d (%s): not an assignment of Gandiva's", AnnAssign, len(a.GPUs), a.GPUs, n, AnnGPUs)
	}
	return nil
}

// ParseAssign decodes and validates an AnnAssign value (strict: unknown
// fields are errors).
func ParseAssign(v string) (Assign, error) {
	var a Assign
	if err := strict(v, &a); err != nil {
		return Assign{}, fmt.Errorf("annotation %s: %w", AnnAssign, err)
	}
	if err := a.Validate(); err != nil {
		return Assign{}, fmt.Errorf("annotation %s: %w", AnnAssign, err)
	}
	return a, nil
}

// ParseStatus decodes and validates an AnnStatus value.
func ParseStatus(v string) (Status, error) {
	var s Status
	if err := strict(v, &s); err != nil {
		return Status{}, fmt.Errorf("annotation %s: %w", AnnStatus, err)
	}
	if err := s.Validate(); err != nil {
		return Status{}, fmt.Errorf("annotation %s: %w", AnnStatus, err)
	}
	return s, nil
}

// String encodes a valid Assign as the annotation's value.
func (a Assign) String() string { return encode(a) }

// String encodes a Status as the annotation's value.
func (s Status) String() string { return encode(s) }

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("shared: encoding %T: %v", v, err))
	}
	return string(b)
}

func strict(v string, into any) error {
	d := json.NewDecoder(strings.NewReader(v))
	d.DisallowUnknownFields()
	if err := d.Decode(into); err != nil {
		return err
	}
	if d.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// ParseGPUs reads the AnnGPUs value: a positive number of GPUs per pod.
func ParseGPUs(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 || n > 1024 {
		return 0, fmt.Errorf("annotation %s: want a positive number of GPUs, got %q", AnnGPUs, v)
	}
	return n, nil
}

// Equal says whether two GPU lists are the same set (both sorted).
func Equal(a, b []int) bool { return slices.Equal(a, b) }
