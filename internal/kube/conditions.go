package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/visible"
)

// What Gandiva shows on a workload's object (a Job, a JobSet, a
// LeaderWorkerSet, a RayJob; a TrainJob's JobSet and the TrainJob): its
// decision and why, for `kubectl describe` and `kubectl get -o yaml`, in
// two forms. The annotation AnnReason is one line, on every kind. The
// status conditions CondScheduling and CondCheckpoint (metav1.Condition's
// fields) are on the kinds whose status has conditions (a RayJob's has
// none: its CRD's schema prunes them); they are merged by type beside the
// owning controller's own, which keeps them (its status updates carry the
// object's conditions it read). docs/KUBERNETES.md ("What Gandiva writes")
// is the spec; the ValidatingAdmissionPolicy gandiva-scheduler-workloads
// (deploy/base/rbac.yaml) lets the scheduler change nothing else.
const (
	// AnnReason is the scheduling condition's reason and message in one
	// line ("Waiting: queued: needs 4 GPUs, ..."): what `kubectl gandiva
	// explain` says of a waiting workload. At most MaxReasonBytes.
	AnnReason = "gandiva.io/reason"
	// CondScheduling is Gandiva's decision: status True while it has the
	// workload run (reason Running or Moving), False while it waits
	// (Waiting: not run yet; Preempted: suspended by the policy to run
	// others, it resumes from its checkpoint), and once it is over
	// (Stopped: stopped for good by the policy; Ended).
	CondScheduling = "GandivaScheduling"
	// CondCheckpoint is the last checkpoint Gandiva knows of (the
	// checkpoint contract's annotations): True, reason Saved, its time as
	// the lastTransitionTime, its time, step and cost in the message;
	// False, reason BadAnnotation, when the annotations are malformed.
	CondCheckpoint = "GandivaCheckpoint"
	// MaxReasonBytes bounds AnnReason and the conditions' messages.
	MaxReasonBytes = 1024
)

// The CondScheduling reasons.
const (
	ReasonWaiting   = "Waiting"
	ReasonPreempted = "Preempted"
	ReasonRunning   = "Running"
	ReasonMoving    = "Moving"
	ReasonStopped   = "Stopped"
	ReasonEnded     = "Ended"
)

// gandivaConditions are the condition types Gandiva writes (and the only
// ones the admission policy lets it change).
var gandivaConditions = []string{CondScheduling, CondCheckpoint}

// statusEvery is how often at most a workload's status is written;
// statusReassert how often at most the same status is written again (the
// object does not show it: erased by someone, or a write lost).
const (
	statusEvery    = 5 * time.Second
	statusReassert = time.Minute
	// statusBatch bounds the status writes queued per scan (once a second).
	statusBatch = 128
)

// WorkloadStatus is what Gandiva writes on a workload's object: the
// AnnReason text and its conditions (of the types gandivaConditions).
type WorkloadStatus struct {
	Reason     string
	Conditions []metav1.Condition
}

// statusShown is the loop's record of the status written on a workload.
type statusShown struct {
	key string    // statusKey of the last one written
	at  time.Time // when
}

// statusInput is what a workload's status is decided from: the engine's
// job (nil: not submitted), the object's annotations (Gandiva's state and
// placement, the checkpoint contract's), the wait reason it was last told
// (tellWaiting) and the policy's name.
type statusInput struct {
	job     *cluster.Job
	ann     map[string]string
	waitMsg string
	policy  string
	over    bool // the object is complete or failed
}

// decideStatus is the status a workload's object should show, or false
// when it should show none yet (not submitted, or waiting and not told
// why yet: most jobs start at once). It is pure; the conditions'
// lastTransitionTime is left zero (stamp fills it).
func decideStatus(in statusInput) (WorkloadStatus, bool) {
	j := in.job
	if j == nil {
		return WorkloadStatus{}, false
	}
	var status metav1.ConditionStatus
	var reason, msg string
	placement := in.ann[AnnPlacement]
	where := ""
	if placement != "" {
		where = " on " + placement
	}
	switch {
	case in.ann[AnnState] == StateKilled:
		status, reason, msg = metav1.ConditionFalse, ReasonStopped, "stopped for good by policy "+in.policy
	case in.over || j.State.Terminal():
		status, reason, msg = metav1.ConditionFalse, ReasonEnded, "over; Gandiva schedules it no more"
	case j.State == cluster.Migrating:
		status, reason, msg = metav1.ConditionTrue, ReasonMoving, "moving"+strings.Replace(where, " on ", " to ", 1)+
			" by policy "+in.policy+": its pods checkpoint and stop, then start there"
	case j.State.Holding() || j.State == cluster.Warming:
		status, reason, msg = metav1.ConditionTrue, ReasonRunning, "running"+where+" (policy "+in.policy+")"
	case j.State.Waiting():
		preempted := j.State == cluster.Suspended || j.Suspends > 0
		status, reason, msg = metav1.ConditionFalse, ReasonWaiting, in.waitMsg
		switch {
		case preempted && msg == "":
			// (just suspended: why it waits is told in 2 s)
			reason, msg = ReasonPreempted, "suspended by policy "+in.policy+"; it resumes from its checkpoint when the policy runs it again"
		case preempted:
			reason = ReasonPreempted
		case msg == "":
			return WorkloadStatus{}, false
		}
	default:
		return WorkloadStatus{}, false
	}
	msg = boundLine(msg)
	st := WorkloadStatus{
		Reason:     boundLine(reason + ": " + msg),
		Conditions: []metav1.Condition{{Type: CondScheduling, Status: status, Reason: reason, Message: msg}},
	}
	c, ok, err := readCheckpoint(in.ann)
	switch {
	case err != nil:
		st.Conditions = append(st.Conditions, metav1.Condition{Type: CondCheckpoint, Status: metav1.ConditionFalse,
			Reason: "BadAnnotation", Message: boundLine(err.Error())})
	case ok:
		st.Conditions = append(st.Conditions, metav1.Condition{Type: CondCheckpoint, Status: metav1.ConditionTrue,
			Reason: "Saved", Message: boundLine("last checkpoint " + c.String()),
			LastTransitionTime: metav1.NewTime(time.Unix(0, int64(c.at*1e9)).UTC().Truncate(time.Second))})
	}
	return st, true
}

// boundLine is s on one line, valid UTF-8, at most MaxReasonBytes (cut
// with "…"), with every control or invisible format character
// (visible.Hidden: C0 and C1 controls, bidirectional overrides, zero-width
// characters, line and paragraph separators) as a space: a workload's
// name, which a user chose, may appear in it, and `kubectl describe` and
// `kubectl get -o yaml` print it as it is.
func boundLine(s string) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		if visible.Hidden(r) {
			return ' '
		}
		return r
	}, s)
	if len(s) <= MaxReasonBytes {
		return s
	}
	cut := MaxReasonBytes - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// shownCondition is a condition as an object shows it.
type shownCondition struct {
	Status, Reason, Message string
	At                      time.Time
}

// shownStatus reads what an object shows of Gandiva's status: its
// AnnReason and its conditions of Gandiva's types. Malformed conditions
// (a hostile status) are skipped.
func shownStatus(obj Object) (string, map[string]shownCondition) {
	out := map[string]shownCondition{}
	keep := func(typ, status, reason, msg string, at time.Time) {
		for _, t := range gandivaConditions {
			if t == typ {
				out[typ] = shownCondition{status, reason, msg, at}
			}
		}
	}
	switch o := obj.(type) {
	case *batchv1.Job:
		for _, c := range o.Status.Conditions {
			keep(string(c.Type), string(c.Status), c.Reason, c.Message, c.LastTransitionTime.Time)
		}
	case *unstructured.Unstructured:
		conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
		for _, x := range conds {
			m, ok := x.(map[string]any)
			if !ok {
				continue
			}
			str := func(k string) string { v, _ := m[k].(string); return v }
			at, _ := time.Parse(time.RFC3339, str("lastTransitionTime"))
			keep(str("type"), str("status"), str("reason"), str("message"), at)
		}
	}
	return obj.GetAnnotations()[AnnReason], out
}

// stamp sets the conditions' lastTransitionTime: a checkpoint's stays
// its own; another's stays the one the object shows while its status does
// not change, else it is wall.
func stamp(st WorkloadStatus, shown map[string]shownCondition, wall time.Time) {
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if !c.LastTransitionTime.IsZero() {
			continue
		}
		c.LastTransitionTime = metav1.NewTime(wall.UTC().Truncate(time.Second))
		if old, ok := shown[c.Type]; ok && old.Status == string(c.Status) && !old.At.IsZero() {
			c.LastTransitionTime = metav1.NewTime(old.At.UTC())
		}
	}
}

// statusKey is a status' identity for "changed?": its reason and its
// conditions' types, statuses, reasons and messages (and a checkpoint's
// time), not when they were written.
func statusKey(reason string, conds map[string]shownCondition) string {
	types := make([]string, 0, len(conds))
	for t := range conds {
		types = append(types, t)
	}
	sort.Strings(types)
	b, _ := json.Marshal(reason)
	key := string(b)
	for _, t := range types {
		c := conds[t]
		at := ""
		if t == CondCheckpoint {
			at = c.At.UTC().Format(time.RFC3339)
		}
		b, _ := json.Marshal([]string{t, c.Status, c.Reason, c.Message, at})
		key += "|" + string(b)
	}
	return key
}

// wantedKey is statusKey of the status st (what the object shows once it
// is written).
func wantedKey(st WorkloadStatus) string {
	m := map[string]shownCondition{}
	for _, c := range st.Conditions {
		m[c.Type] = shownCondition{string(c.Status), c.Reason, c.Message, c.LastTransitionTime.Time}
	}
	return statusKey(st.Reason, m)
}

// shownKey is statusKey of what obj shows, restricted to the condition
// types wanted has (a conditionless kind's status wants none).
func shownKey(obj Object, wanted WorkloadStatus) string {
	reason, shown := shownStatus(obj)
	m := map[string]shownCondition{}
	for _, c := range wanted.Conditions {
		if s, ok := shown[c.Type]; ok {
			m[c.Type] = s
		}
	}
	return statusKey(reason, m)
}

// statusDue decides whether a workload's status is written now: it is
// when what the object shows differs from what it should and the last
// write is statusEvery old (statusReassert when that write was the same
// status: the object does not keep it). Else it returns how long until it
// may be (0: never, the object shows it).
func statusDue(want, shown string, last statusShown, wall time.Time) (bool, time.Duration) {
	if want == shown {
		return false, 0
	}
	gap := statusEvery
	if last.key == want {
		gap = statusReassert
	}
	if last.at.IsZero() {
		return true, 0
	}
	if wait := gap - wall.Sub(last.at); wait > 0 {
		return false, wait
	}
	return true, 0
}

// writeStatus writes the workloads' status (decideStatus) where their
// objects do not show it yet, through the low dispatcher: at most once a
// second of wall time a scan of the workloads of a kind, at most
// statusBatch writes a scan, each workload's at most every statusEvery.
// It returns the engine time at which a write held back is due (0: none).
func (s *Scheduler) writeStatus() float64 {
	wall := time.Now()
	if !s.statusScan.IsZero() && wall.Sub(s.statusScan) < time.Second {
		return s.clk.of(s.statusScan.Add(time.Second))
	}
	s.statusScan = wall
	keys := make([]string, 0, len(s.ws))
	for k, ws := range s.ws {
		if ws.w.kind != nil && ws.id != cluster.NoJob {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	due, n := 0.0, 0
	for _, key := range keys {
		ws := s.ws[key]
		obj, err := s.object(ws.w)
		if err != nil || obj == nil || obj.GetUID() != ws.w.uid {
			continue
		}
		over, _, _ := ws.w.kind.Finished(obj)
		st, ok := decideStatus(statusInput{job: s.eng.Job(ws.id), ann: obj.GetAnnotations(), waitMsg: ws.waitMsg,
			policy: s.pol.Name(), over: over || ws.ended})
		if !ok {
			continue
		}
		if c, ok := ws.w.kind.(conditionless); ok && c.Conditionless() {
			st.Conditions = nil // (the annotation alone: what such an object can show)
		}
		_, shown := shownStatus(obj)
		stamp(st, shown, wall)
		want := wantedKey(st)
		write, wait := statusDue(want, shownKey(obj, st), ws.status, wall)
		if !write {
			if wait > 0 {
				if d := s.clk.of(wall.Add(wait)); due == 0 || d < due {
					due = d
				}
			}
			continue
		}
		opKey := "status:" + key
		if s.busy(opKey) {
			continue
		}
		if n == statusBatch {
			if d := s.clk.of(wall.Add(time.Second)); due == 0 || d < due {
				due = d
			}
			break
		}
		n++
		ws.status = statusShown{key: want, at: wall}
		k, cl := ws.w.kind, &Clients{Typed: s.low, Dynamic: s.cl.Dynamic}
		s.submitLow(op{key: opKey, do: func(ctx context.Context) opResult {
			err := k.WriteStatus(ctx, cl, obj, st)
			switch {
			case err == nil || apierrors.IsNotFound(err):
			case apierrors.IsConflict(err):
				s.log.Debug("status not written: the object changed (written again at the next scan)", "workload", key, "err", err)
			default:
				return opResult{err: fmt.Errorf("writing %s %s/%s's status: %w", k.GVK().Kind, obj.GetNamespace(), obj.GetName(), err)}
			}
			return opResult{}
		}})
	}
	return due
}

// conditionless is a Kind whose objects' status has no conditions (a
// RayJob's: its CRD's schema has none, and the API server prunes what it
// does not know): its WriteStatus writes the annotation alone, and only
// the annotation is compared with what the object shows.
type conditionless interface{ Conditionless() bool }

// ---- the writers (Kind.WriteStatus) ----

// jobCondition is a Gandiva condition as a batch/v1 Job's.
func jobCondition(c metav1.Condition) batchv1.JobCondition {
	return batchv1.JobCondition{Type: batchv1.JobConditionType(c.Type), Status: corev1.ConditionStatus(c.Status),
		Reason: c.Reason, Message: c.Message, LastProbeTime: c.LastTransitionTime, LastTransitionTime: c.LastTransitionTime}
}

// writeJobStatus writes a Job's status in one strategic merge patch of its
// status subresource: the conditions merge by type with the Job
// controller's (which keeps them), and the annotation comes with them (a
// Job's status writes may change its metadata).
func writeJobStatus(ctx context.Context, c *Clients, obj Object, st WorkloadStatus) error {
	conds := make([]batchv1.JobCondition, 0, len(st.Conditions))
	for _, x := range st.Conditions {
		conds = append(conds, jobCondition(x))
	}
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{AnnReason: st.Reason}},
		"status":   map[string]any{"conditions": conds},
	})
	if err != nil {
		return err
	}
	_, err = c.Typed.BatchV1().Jobs(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.StrategicMergePatchType, body,
		metav1.PatchOptions{FieldManager: fieldManager}, "status")
	return err
}

// fieldManager names Gandiva's writes in the objects' managedFields.
const fieldManager = "gandiva"

// mergeConditions is conds (an object's status.conditions, as read) with
// Gandiva's conditions replaced by ours or added: the others' kept as
// they are, in their order.
func mergeConditions(conds []any, ours []metav1.Condition) ([]any, error) {
	out := make([]any, 0, len(conds)+len(ours))
	done := map[string]bool{}
	put := func(c metav1.Condition) (any, error) {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&c)
		return m, err
	}
	for _, x := range conds {
		m, ok := x.(map[string]any)
		typ, _ := m["type"].(string)
		var mine *metav1.Condition
		for i := range ours {
			if ok && ours[i].Type == typ {
				mine = &ours[i]
			}
		}
		if mine == nil {
			out = append(out, x)
			continue
		}
		if done[typ] {
			continue // (a duplicate of ours: dropped)
		}
		done[typ] = true
		m2, err := put(*mine)
		if err != nil {
			return nil, err
		}
		out = append(out, m2)
	}
	for _, c := range ours {
		if !done[c.Type] {
			m, err := put(c)
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		}
	}
	return out, nil
}

// writeCRDStatus writes a custom resource's status: its conditions (when
// conditions is set: the kind's status has them) in a merge patch of its
// status subresource carrying the whole list, the others' conditions as
// obj shows them and ours merged in, guarded by obj's resourceVersion (a
// conflict when the controller wrote meanwhile: written again at the next
// scan); then the annotation in a merge patch of the object.
func writeCRDStatus(ctx context.Context, c *Clients, gvr schema.GroupVersionResource, obj Object, st WorkloadStatus, conditions bool) error {
	if c.Dynamic == nil {
		return fmt.Errorf("no dynamic client")
	}
	r := c.Dynamic.Resource(gvr).Namespace(obj.GetNamespace())
	if conditions {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return fmt.Errorf("%s %s/%s: not an unstructured object (%T)", gvr.Resource, obj.GetNamespace(), obj.GetName(), obj)
		}
		cur, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		conds, err := mergeConditions(cur, st.Conditions)
		if err != nil {
			return err
		}
		body, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": obj.GetResourceVersion()},
			"status":   map[string]any{"conditions": conds},
		})
		if err != nil {
			return err
		}
		if _, err := r.Patch(ctx, obj.GetName(), types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager}, "status"); err != nil {
			return err
		}
	}
	if obj.GetAnnotations()[AnnReason] == st.Reason {
		return nil
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnReason: st.Reason}}})
	if err != nil {
		return err
	}
	_, err = r.Patch(ctx, obj.GetName(), types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager})
	return err
}

// writeTrainJobStatus writes the status of the TrainJob that owns a JobSet
// (its users look at the TrainJob): the same annotation and conditions,
// from the TrainJob as the API server has it now (it is not cached).
func writeTrainJobStatus(ctx context.Context, c *Clients, ns, name string, st WorkloadStatus) error {
	if c.Dynamic == nil {
		return fmt.Errorf("no dynamic client")
	}
	tj, err := c.Dynamic.Resource(trainJobGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	want := wantedKey(st)
	if shownKey(tj, st) == want {
		return nil
	}
	return writeCRDStatus(ctx, c, trainJobGVR, tj, st, true)
}
