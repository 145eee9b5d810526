package kube

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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
