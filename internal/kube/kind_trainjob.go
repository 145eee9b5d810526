package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// Kubeflow Trainer v2's TrainJob (trainer.kubeflow.org/v1alpha1) is
// scheduled as the JobSet it creates: the Trainer builds JobSet NAME (the
// TrainJob's name, controlled by it) from the training runtime's template,
// spec.trainer.numNodes and resourcesPerNode, so the JobSet holds the
// gang's exact shape (pods, GPUs, node constraints, schedulerName), which
// the TrainJob alone does not (its pod template is the runtime's). Its
// spec.annotations reach the JobSet, so Gandiva's annotations
// (gandiva.io/iters, preemptible, ...) go there.
//
// Only its suspension goes through the TrainJob: the Trainer sets the
// JobSet's spec.suspend to the TrainJob's whenever either is suspended, so
// a suspension written on the JobSet alone would be undone. patchJobSet
// writes spec.suspend on the TrainJob, then the whole patch (Gandiva's
// annotations with it) on the JobSet.
var trainJobGVR = schema.GroupVersionResource{Group: "trainer.kubeflow.org", Version: "v1alpha1", Resource: "trainjobs"}

// trainJobOwner is the name of the TrainJob that controls an object (a
// JobSet), if one does.
func trainJobOwner(obj metav1.Object) (string, bool) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != "TrainJob" || ref.Name == "" {
		return "", false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != trainJobGVR.Group {
		return "", false
	}
	return ref.Name, true
}

// ownerSuspend is the TrainJob merge patch that carries a JobSet merge
// patch's spec.suspend, or nil when it sets none.
func ownerSuspend(body []byte) ([]byte, error) {
	var b struct {
		Spec struct {
			Suspend *bool `json:"suspend"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("the JobSet patch: %w", err)
	}
	if b.Spec.Suspend == nil {
		return nil, nil
	}
	return json.Marshal(map[string]any{"spec": map[string]any{"suspend": *b.Spec.Suspend}})
}

// patchJobSet applies a merge patch to JobSet ns/name; for a JobSet of a
// TrainJob, its spec.suspend is first written on the TrainJob (then on the
// JobSet too, as the Trainer will: the scheduler's view of the JobSet is
// right at once, and the Trainer, once it sees the TrainJob, agrees; if it
// acts on an older TrainJob first, it undoes the JobSet's, and the
// scheduler, seeing the JobSet not as it decided, patches both again).
func patchJobSet(ctx context.Context, c *Clients, ns, name string, body []byte) (Object, error) {
	if c.Dynamic == nil {
		return nil, fmt.Errorf("no dynamic client")
	}
	js := c.Dynamic.Resource(jobSetGVR).Namespace(ns)
	cur, err := js.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if owner, ok := trainJobOwner(cur); ok {
		tj, err := ownerSuspend(body)
		if err != nil {
			return nil, err
		}
		if tj != nil {
			if _, err := c.Dynamic.Resource(trainJobGVR).Namespace(ns).Patch(ctx, owner, types.MergePatchType, tj, metav1.PatchOptions{}); err != nil {
				return nil, fmt.Errorf("suspending or resuming TrainJob %s/%s (the JobSet's owner): %w", ns, owner, err)
			}
		}
	}
	return js.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
}

// Kubeflow Trainer v2.2 and later report a TrainJob's training progress in
// its status (status.trainerStatus, feature gate TrainJobStatus): how far
// it is (progressPercentage, 0 to 100), the seconds it expects to need
// still (estimatedRemainingSeconds), its metrics and when it was observed
// (lastUpdatedTime, required). The API served here (v2.0.0) does not have
// the field: it is read from the unstructured object, bounded and
// validated, as a workload's owner writes it (hostile).
//
// What Gandiva does with a report newer than the last one it used, for the
// JobSet of a TrainJob that declares its length (gandiva.io/iters in the
// TrainJob's spec.annotations, which reach the JobSet): the progress
// becomes the work it attained (progressPercentage% of its iters, when
// ahead of what the engine knows), and the remaining seconds its measured
// speed (seconds per mini-batch: remaining seconds over remaining
// mini-batches), which the policies that use progress (srtf, optimus) and
// the ETAs (gandiva.io/eta on its pods) use. A report of a TrainJob that
// declares no length is not used (nothing to scale a percentage by). It
// reports no checkpoint (the checkpoint annotations do).

// trainerReport is a TrainJob's status.trainerStatus as Gandiva uses it.
type trainerReport struct {
	at        float64 // lastUpdatedTime, Unix seconds
	progress  float64 // progressPercentage, 0 to 100; -1: not given
	remaining float64 // estimatedRemainingSeconds; -1: not given
}

// maxTrainerRemaining bounds estimatedRemainingSeconds (an int32 in the
// API: about 68 years).
const maxTrainerRemaining = math.MaxInt32

// maxTrainerIterTime bounds the seconds per mini-batch a report may give
// (a day: a report beyond it is taken as one mini-batch a day).
const maxTrainerIterTime = 86400

// readTrainerStatus reads status.trainerStatus of a TrainJob: ok is false
// when it has none; err says what is wrong with a malformed one (a field
// of the wrong type, out of its range, no lastUpdatedTime).
func readTrainerStatus(obj Object) (r trainerReport, ok bool, err error) {
	u, isU := obj.(*unstructured.Unstructured)
	if !isU {
		return trainerReport{}, false, fmt.Errorf("TrainJob %s/%s: not an unstructured object (%T)", obj.GetNamespace(), obj.GetName(), obj)
	}
	st, has := u.Object["status"]
	if !has || st == nil {
		return trainerReport{}, false, nil
	}
	stm, isMap := st.(map[string]any)
	if !isMap {
		return trainerReport{}, false, fmt.Errorf("TrainJob %s/%s: status is a %T, not an object", u.GetNamespace(), u.GetName(), st)
	}
	ts, has := stm["trainerStatus"]
	if !has || ts == nil {
		return trainerReport{}, false, nil
	}
	m, isMap := ts.(map[string]any)
	if !isMap {
		return trainerReport{}, false, fmt.Errorf("TrainJob %s/%s: status.trainerStatus is a %T, not an object", u.GetNamespace(), u.GetName(), ts)
	}
	bad := func(field string, v any, want string) error {
		s := fmt.Sprint(v)
		if len(s) > 64 {
			s = s[:64] + "..."
		}
		return fmt.Errorf("TrainJob %s/%s: status.trainerStatus.%s=%q: want %s", u.GetNamespace(), u.GetName(), field, s, want)
	}
	num := func(field string, hi float64) (float64, error) {
		v, has := m[field]
		if !has || v == nil {
			return -1, nil
		}
		var f float64
		switch x := v.(type) {
		case int64:
			f = float64(x)
		case int32:
			f = float64(x)
		case int:
			f = float64(x)
		case float64:
			f = x
		default:
			return -1, bad(field, v, fmt.Sprintf("an integer from 0 to %g", hi))
		}
		if math.IsNaN(f) || f < 0 || f > hi || f != math.Trunc(f) {
			return -1, bad(field, v, fmt.Sprintf("an integer from 0 to %g", hi))
		}
		return f, nil
	}
	if r.progress, err = num("progressPercentage", 100); err != nil {
		return trainerReport{}, false, err
	}
	if r.remaining, err = num("estimatedRemainingSeconds", maxTrainerRemaining); err != nil {
		return trainerReport{}, false, err
	}
	lu, _ := m["lastUpdatedTime"].(string)
	t, perr := time.Parse(time.RFC3339, lu)
	if perr != nil {
		return trainerReport{}, false, bad("lastUpdatedTime", m["lastUpdatedTime"], "an RFC 3339 time (required)")
	}
	r.at = float64(t.Unix())
	return r, true, nil
}

// trainerEvent is the engine event that reports r for job j at now, or
// false when it has nothing to tell: j unknown, over, or of no declared
// length, or r says nothing new (its progress not ahead, no remaining
// seconds while j holds GPUs).
func trainerEvent(j *cluster.Job, r trainerReport, now float64) (cluster.Event, bool) {
	if j == nil || j.State.Terminal() || j.Spec.Iters <= 0 {
		return cluster.Event{}, false
	}
	done := j.Done
	if r.progress >= 0 {
		done = max(done, r.progress/100*j.Spec.Iters)
	}
	ev := cluster.Event{Time: now, Kind: cluster.EvProfile, Job: j.ID, Done: done}
	if left := j.Spec.Iters - done; r.remaining >= 0 && left > 0 && j.State.Holding() && len(j.GPUs) > 0 {
		ev.IterTime = min(r.remaining/left, maxTrainerIterTime)
	}
	if done <= j.Done && ev.IterTime <= 0 {
		return cluster.Event{}, false
	}
	return ev, true
}

// progressReporter is an optional part of a Kind whose workloads report
// their training progress (not every kind's do): the report of workload
// object obj, read from obj or from an object of another resource that
// lookup gives from the informers' caches (nil, false: not cached).
type progressReporter interface {
	progress(obj Object, lookup func(gvr schema.GroupVersionResource, ns, name string) (Object, bool)) (trainerReport, bool, error)
}

var _ progressReporter = jobSetKind{}

// progress: a JobSet of a TrainJob reports the TrainJob's trainerStatus
// (the TrainJob that controls it: same UID as its owner reference).
func (jobSetKind) progress(obj Object, lookup func(gvr schema.GroupVersionResource, ns, name string) (Object, bool)) (trainerReport, bool, error) {
	owner, ok := trainJobOwner(obj)
	if !ok {
		return trainerReport{}, false, nil
	}
	tj, ok := lookup(trainJobGVR, obj.GetNamespace(), owner)
	if !ok || tj.GetUID() != metav1.GetControllerOfNoCopy(obj).UID {
		return trainerReport{}, false, nil
	}
	return readTrainerStatus(tj)
}

// trainJobWatch is the informer of the TrainJobs (for their status), set
// once the API server serves them and this scheduler may read them.
type trainJobWatch struct {
	mu  sync.Mutex
	inf cache.SharedIndexInformer
}

func (w *trainJobWatch) informer() cache.SharedIndexInformer {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inf
}

// watchTrainJobs starts the TrainJobs' informer once they are served
// (looked for now and then every poll); a TrainJob's change is a change of
// its JobSet's workload (same name). It returns when ctx ends.
func (s *Scheduler) watchTrainJobs(ctx context.Context, poll time.Duration) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		inf, err := crdInformer(&s.cl, trainJobGVR)
		if err == nil {
			changed := func(obj any) {
				if o, ok := unwrap(obj).(Object); ok {
					s.q.Add(qkey{keyWorkload, objectKey(jobSetKind{}, o.GetNamespace(), o.GetName())})
				}
			}
			if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc:    changed,
				UpdateFunc: func(_, obj any) { changed(obj) },
			}); err != nil {
				s.log.Warn("TrainJob status not read", "err", err)
				return
			}
			done := make(chan struct{})
			go func() { defer close(done); inf.Run(ctx.Done()) }()
			if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				s.trainJobs.mu.Lock()
				s.trainJobs.inf = inf
				s.trainJobs.mu.Unlock()
				s.log.Info("reading TrainJobs' status.trainerStatus: the API server serves them")
			}
			<-done
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// lookupCached is an object of a resource the scheduler watches besides
// the workload kinds (TrainJobs), from the informer's cache.
func (s *Scheduler) lookupCached(gvr schema.GroupVersionResource, ns, name string) (Object, bool) {
	if gvr != trainJobGVR {
		return nil, false
	}
	inf := s.trainJobs.informer()
	if inf == nil {
		return nil, false
	}
	o, ok, err := inf.GetIndexer().GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	obj, isObj := o.(Object)
	return obj, isObj
}

// observeProgress passes a workload's progress report (progressReporter),
// when newer than the last one passed (a time in the future counting as
// now), to the engine (syncWorkload). A malformed report is logged and
// otherwise ignored.
func (s *Scheduler) observeProgress(ws *wstate, obj Object, now float64) {
	pr, ok := ws.w.kind.(progressReporter)
	if !ok {
		return
	}
	r, ok, err := pr.progress(obj, s.lookupCached)
	if err != nil {
		s.log.Debug("progress report ignored", "workload", ws.w.key, "err", err)
		return
	}
	if !ok {
		return
	}
	// the report's time and seconds are the wall clock's; a time in the
	// future counts as now
	at := min(s.clk.at(r.at), now)
	if at <= ws.reportAt {
		return
	}
	if r.remaining > 0 {
		r.remaining *= s.clk.rate()
	}
	ev, ok := trainerEvent(s.eng.Job(ws.id), r, now)
	if !ok {
		return // nothing to use yet: looked at again at its next change
	}
	if err := s.eng.Apply(ev); err != nil {
		s.log.Debug("progress report not applied", "workload", ws.w.key, "err", err)
		return
	}
	ws.reportAt = at
	s.pending++
	// the job's expected end changed: forecast again (forecastSoon, after
	// this round; at most every kubeETAEvery), not only once the jobs'
	// states change or the last forecast is stale
	s.fc.sig = 0
	s.log.Debug("progress report applied", "workload", ws.w.key, "done", ev.Done, "iterTime", ev.IterTime)
}
