package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"

	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
)

type engineApplied = engine.Applied

// Options configure Run.
type Options struct {
	// Policy is a registered policy with optional parameters, as for
	// `gandiva sim --policy` ("tiresias-l", "gandiva-fair:tickets=a:4/b:1").
	Policy string
	// Namespace holds the leader-election Lease and the settings ConfigMap.
	Namespace string
	// LeaseName names the Lease ("gandiva-scheduler" if empty).
	LeaseName string
	// Identity names this replica in the Lease (host name and a random
	// suffix if empty).
	Identity string
	// SettingsConfigMap names the ConfigMap of run-time settings
	// ("gandiva-settings" if empty): key "tickets.team-a" sets the
	// policy's setting "tickets/team-a".
	SettingsConfigMap string
	// Workers is the number of concurrent API calls (256 if 0): bindings
	// wait on the API server, not on the CPU, so many go at once (and the
	// API server's etcd commits concurrent writes together: on the local
	// bench 256 bound about 1.4× as many pods a second as 64;
	// docs/PERFORMANCE.md).
	Workers int
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election
	// (15 s, 10 s and 2 s if 0, client-go's usual values).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Dynamic reads PodGroups (nil: gang sizes of PodGroups are ignored).
	Dynamic dynamic.Interface
	// Log receives the scheduler's log (nil: discarded).
	Log *slog.Logger
	// Dashboard, when set, is given each term's Scheduler, which then
	// records its timeline for it (ui.go); nil when this replica does not lead.
	Dashboard *Dashboard
	// ReservationImage is the image of the reservation pods of shared
	// nodes (DefaultReservationImage if empty): it must exist on every
	// shared node's registry mirror; the pod only holds the GPUs.
	ReservationImage string
	// OnLeading, when set, is called with each new Scheduler once it leads
	// (tests and benchmarks read its Stats).
	OnLeading func(*Scheduler)
	// Metrics, when set, shows the leading term's Scheduler and the
	// Events it records to Prometheus (metrics.go).
	Metrics *Metrics
	// ClockSpeed, for simulations and arenas only, makes the engine's
	// clock run ClockSpeed times faster than the wall clock from the
	// term's start (0 or 1: the wall clock; negative, NaN or infinite:
	// an error): a policy's time constants and declared seconds per
	// mini-batch are then in seconds of a trace replayed that much
	// faster (clock.go). Not for production: every time the engine keeps
	// (checkpoints, ETAs, queue GPU-seconds) is converted with it.
	ClockSpeed float64
	// StartUpGrace bounds, in wall time, a workload's start-up that is
	// not charged as service: from a placement until all of its gang's
	// pods run (the Job unsuspended, its pods made, bound, their images
	// pulled) the engine charges it nothing, and Tiresias' queues do not
	// demote it for that time; a gang whose pods do not all run within
	// the grace (an image that cannot be pulled, a pod that cannot run)
	// is charged from then on as any running job. 0 or negative (the
	// default): start-ups are charged from the placement, as the simulator
	// charges them (engine Options.StartUpGrace, at the clock's speed).
	// Off by default: in the arena it ended the starvation of large gangs
	// but raised the average JCT (docs/ARENA.md).
	StartUpGrace time.Duration
}

func (o *Options) defaults() {
	if o.LeaseName == "" {
		o.LeaseName = "gandiva-scheduler"
	}
	if o.SettingsConfigMap == "" {
		o.SettingsConfigMap = "gandiva-settings"
	}
	if o.Namespace == "" {
		o.Namespace = "gandiva-system"
	}
	if o.Identity == "" {
		h, _ := os.Hostname()
		b := make([]byte, 4)
		rand.Read(b)
		o.Identity = h + "-" + hex.EncodeToString(b)
	}
	if o.Workers <= 0 {
		o.Workers = 256
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = 15 * time.Second
	}
	if o.RenewDeadline <= 0 {
		o.RenewDeadline = 10 * time.Second
	}
	if o.RetryPeriod <= 0 {
		o.RetryPeriod = 2 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Policy == "" {
		o.Policy = "tiresias-l"
	}
	if o.ReservationImage == "" {
		o.ReservationImage = DefaultReservationImage
	}
}

// newPolicy builds the configured policy.
func (o *Options) newPolicy() (policy.Policy, error) {
	names, params, err := registry.Parse(o.Policy)
	if err != nil {
		return nil, fmt.Errorf("--policy: %w", err)
	}
	if len(names) != 1 {
		return nil, fmt.Errorf("--policy: gandiva kube runs one policy, got %d", len(names))
	}
	p, err := registry.New(names[0], policy.Config{Params: params[0]})
	if err != nil {
		return nil, fmt.Errorf("--policy: %w", err)
	}
	return p, nil
}

// CheckPolicy reports whether o.Policy names a policy Run can build.
func CheckPolicy(name string) error {
	o := Options{Policy: name}
	_, err := o.newPolicy()
	return err
}

// ErrNoNamespace is wrapped by Run's error when the namespace of the
// leader Lease (Options.Namespace) does not exist and this account may not
// create it, or may not create Leases there.
var ErrNoNamespace = errors.New("kube: no usable namespace for the leader Lease")

// ensureNamespace makes sure the Lease of o can be created in o.Namespace
// before leader election starts (which would otherwise retry a missing
// namespace every RetryPeriod, forever). It asks the API server to create
// the Lease as a dry run: when the namespace does not exist, it creates
// it, if this account may; when it may not, or when the account may not
// create Leases there, it returns an error wrapping ErrNoNamespace that
// says what to do. Other errors (the API server unreachable) are logged
// and left to leader election, which retries them.
func ensureNamespace(ctx context.Context, cs kubernetes.Interface, o Options) error {
	ns := o.Namespace
	lease := &coordinationv1.Lease{ObjectMeta: metav1ObjectMeta(ns, o.LeaseName)}
	_, err := cs.CoordinationV1().Leases(ns).Create(ctx, lease, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil || apierrors.IsAlreadyExists(err):
		return nil
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%w: this account may not create the Lease %s/%s (%v): if namespace %s does not exist, create it (kubectl apply -k deploy/base creates it, with the account's Role), else bind the account the Role of deploy/base/rbac.yaml there; or pass --namespace naming a namespace where it has that Role",
			ErrNoNamespace, ns, o.LeaseName, err, ns)
	case !isNamespaceNotFound(err):
		o.Log.Warn("cannot check the namespace of the leader Lease; leader election will retry", "namespace", ns, "err", err)
		return nil
	}
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	switch {
	case err == nil:
		o.Log.Info("created the namespace of the leader Lease", "namespace", ns)
		return nil
	case apierrors.IsAlreadyExists(err):
		return nil // created meanwhile (another replica)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%w: namespace %q does not exist and this account may not create it: create it (kubectl create namespace %s, or kubectl apply -k deploy/base), or pass --namespace naming an existing one",
			ErrNoNamespace, ns, ns)
	default:
		return fmt.Errorf("kube: creating namespace %q of the leader Lease: %w", ns, err)
	}
}

// isNamespaceNotFound reports whether err says that a namespace does not
// exist (as a create in a missing namespace answers), rather than the
// object asked for.
func isNamespaceNotFound(err error) bool {
	var st apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &st) {
		return false
	}
	d := st.Status().Details
	return d != nil && d.Kind == "namespaces"
}

// ErrLostLease is returned by Run when this replica stopped leading.
var ErrLostLease = errors.New("kube: lost the leader lease")

// Run schedules the cluster of cfg until ctx ends: it waits to lead (a
// coordination.k8s.io Lease, so two replicas are safe), rebuilds its state
// from the API server and runs the engine. It first creates o.Namespace if
// it is missing and the account may; if it may not, Run returns at once an
// error wrapping ErrNoNamespace. It returns nil when ctx ends,
// ErrLostLease when another replica took over (the process should exit and
// be restarted), or an error that prevents it from starting.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	o.defaults()
	if _, err := o.newPolicy(); err != nil {
		return err
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 500, 1000
	}
	cfg.UserAgent = "gandiva-kube"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kube: %w", err)
	}
	if o.Dynamic == nil {
		if o.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
			return fmt.Errorf("kube: %w", err)
		}
	}
	// Events and waiting reasons go through a client of their own (its own
	// rate limit), so that they never hold bindings back, as kube-scheduler does
	low, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kube: %w", err)
	}
	// (not stopped with ctx, which made the term's last Events, such as
	// the lease's release, fail with "broadcaster already stopped": the
	// deferred Shutdown stops it once the term's scheduler has ended)
	bc := record.NewBroadcaster(record.WithContext(context.WithoutCancel(ctx)))
	bc.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: low.CoreV1().Events("")})
	defer bc.Shutdown()
	rec := bc.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "gandiva"})
	if o.Metrics != nil {
		bc.StartEventWatcher(o.Metrics.event)
	}

	if err := ensureNamespace(ctx, cs, o); err != nil {
		return err
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1ObjectMeta(o.Namespace, o.LeaseName),
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: o.Identity, EventRecorder: rec},
	}
	done := make(chan struct{})
	var led atomic.Bool
	var runErr error
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.LeaseDuration,
		RenewDeadline:   o.RenewDeadline,
		RetryPeriod:     o.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            o.LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				led.Store(true)
				defer close(done)
				o.Log.Info("leading", "identity", o.Identity, "policy", o.Policy)
				s, err := newScheduler(cs, low, o, rec)
				if err != nil {
					runErr = err
					return
				}
				if o.OnLeading != nil {
					o.OnLeading(s)
				}
				if o.Metrics != nil {
					o.Metrics.lead(s)
					defer o.Metrics.lead(nil)
				}
				if o.Dashboard != nil {
					o.Dashboard.lead(s)
					defer o.Dashboard.lead(nil)
				}
				if err := s.run(ctx); err != nil {
					runErr = err
				}
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("kube: leader election: %w", err)
	}
	if o.Dashboard != nil {
		o.Dashboard.elected(o.Identity, le.GetLeader)
	}
	le.Run(ctx)
	if !led.Load() {
		return nil // ctx ended before this replica led
	}
	<-done // the term's scheduler has stopped: no call of it is left in flight
	if runErr != nil {
		return runErr
	}
	if ctx.Err() != nil {
		return nil
	}
	return ErrLostLease
}
