package kube

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// kindViews adds to views (by workload key) the workloads of every
// custom-resource kind of workloadKinds in namespace ns ("" for all), one
// generic path through the Kind registry: the kind's resource (found by
// discovery), its objects Gandiva schedules (managedObject), their
// decision (AnnState, AnnPlacement) or their end. The JobSet of a TrainJob
// is shown as the TrainJob. A kind the API server does not serve adds
// nothing; one the caller may not list adds a note saying so (the others
// are still listed). Any other error is returned.
func kindViews(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, ns string, views map[string]*JobView) (notes []string, _ error) {
	for _, k := range workloadKinds {
		gvk := k.GVK()
		if gvk.Group == "batch" {
			continue // batch/v1 Jobs: typed (List)
		}
		gvr, ok, err := servedResource(cs, gvk)
		if err != nil {
			return notes, err
		}
		if !ok {
			continue
		}
		l, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		switch {
		case apierrors.IsForbidden(err):
			where := "in namespace " + ns
			if ns == "" {
				where = "in every namespace"
			}
			notes = append(notes, fmt.Sprintf("%ss not shown: you may not list %s.%s %s", gvk.Kind, gvr.Resource, gvr.Group, where))
			continue
		case apierrors.IsNotFound(err):
			continue // (its CRD deleted since discovery)
		case err != nil:
			return notes, fmt.Errorf("listing %s.%s: %w", gvr.Resource, gvr.Group, err)
		}
		for i := range l.Items {
			obj := &l.Items[i]
			if !managedObject(k, obj) {
				continue
			}
			views[objectKey(k, obj.GetNamespace(), obj.GetName())] = objectView(k, obj)
		}
	}
	return notes, nil
}

// servedResource is the resource of kind gvk as the API server serves it
// (ok false: not served, its CRD not installed).
func servedResource(cs kubernetes.Interface, gvk schema.GroupVersionKind) (_ schema.GroupVersionResource, ok bool, _ error) {
	l, err := cs.Discovery().ServerResourcesForGroupVersion(gvk.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return schema.GroupVersionResource{}, false, nil
	}
	if err != nil {
		return schema.GroupVersionResource{}, false, fmt.Errorf("asking the API server whether it serves %s: %w", gvk.GroupVersion(), err)
	}
	for _, r := range l.APIResources {
		if r.Kind == gvk.Kind && r.Group == "" && r.Version == "" && !strings.Contains(r.Name, "/") {
			return gvk.GroupVersion().WithResource(r.Name), true, nil
		}
	}
	return schema.GroupVersionResource{}, false, nil
}

// objectView is the view of an object of kind k Gandiva schedules (its
// pods are added by ListKinds).
func objectView(k Kind, obj Object) *JobView {
	done, failed, _ := k.Finished(obj)
	v := newJobView(obj, k.GVK().Kind, fromObject(k, obj), done, failed)
	if owner, ok := trainJobOwner(obj); ok {
		// the TrainJob is what its user made and reads: shown as such
		v.Object = v.Kind + "/" + v.Name
		v.Kind, v.Name = "TrainJob", owner
	}
	return v
}
