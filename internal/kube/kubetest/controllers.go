package kubetest

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/ctl"
)

// Names of the workload controllers StartControllers runs (package ctl).
const (
	// JobSetController is the JobSet controller manager (sigs.k8s.io/jobset).
	JobSetController = ctl.JobSet
	// TrainerController is the Kubeflow Trainer v2 controller manager
	// (TrainJob); it needs JobSetController, which StartControllers then
	// starts first.
	TrainerController = ctl.Trainer
	// KubeAppsController is kube-apps (tools/kubeapps), Kubernetes' own
	// StatefulSet controller and garbage collector of dependents.
	// LWSController and KubeRayController need it.
	KubeAppsController = ctl.KubeApps
	// LWSController is the LeaderWorkerSet controller manager
	// (sigs.k8s.io/lws).
	LWSController = ctl.LWS
	// KubeRayController is the KubeRay operator (RayCluster, RayJob,
	// RayService).
	KubeRayController = ctl.KubeRay
	// PyTorchController is the Kubeflow Training Operator v1
	// (PyTorchJob).
	PyTorchController = ctl.PyTorch
)

// TorchRuntime is the ClusterTrainingRuntime that StartControllers
// installs with TrainerController (ctl.TorchRuntime).
const TorchRuntime = ctl.TorchRuntime

// LWSNameLabel is the label the LeaderWorkerSet controller puts on the pods
// of a LeaderWorkerSet (its name).
const LWSNameLabel = ctl.LWSNameLabel

// Controller is a workload controller process that StartControllers started.
type Controller = ctl.Controller

// Unbuilt ends the test for err: it skips it when err says that a binary
// is not built (cplane.ErrNoBinaries, a *ctl.NotBuiltError: the message
// names the script that builds it), except under CI=true, where it fails,
// as it does for any other error: CI must run these tests.
func Unbuilt(t testing.TB, err error) {
	t.Helper()
	var nb *ctl.NotBuiltError
	unbuilt := errors.As(err, &nb) || errors.Is(err, cplane.ErrNoBinaries)
	switch {
	case unbuilt && os.Getenv("CI") != "true":
		t.Skip(err)
	case unbuilt:
		t.Fatalf("%v\n(CI=true: the tests that need it must run; .ci/run builds it first)", err)
	default:
		t.Fatal(err)
	}
}

// StartControllers is ctl.Start for a test: it starts the named workload
// controllers (JobSetController, TrainerController, ...; those they need
// first) on p, each in a directory of the test's, and returns them by
// name. At the end of the test it stops them (ctl.Set.Stop); a failed test
// logs the tail of each one's log. When a controller's binary is missing
// it skips the test saying how to build it, except under CI=true, where it
// fails.
func StartControllers(t testing.TB, p *cplane.Plane, names ...string) map[string]*Controller {
	t.Helper()
	if _, err := ctl.Check(names...); err != nil {
		Unbuilt(t, err)
	}
	s, err := ctl.Start(context.Background(), p, ctl.Options{Dir: t.TempDir()}, names...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			for _, n := range s.Order {
				c := s.ByName[n]
				t.Logf("%s controller log (%s):\n%s", n, c.Log, cplane.Tail(c.Log, 60))
			}
		}
	})
	for _, n := range s.Order {
		t.Logf("%s controller ready (log %s)", n, s.ByName[n].Log)
	}
	return s.ByName
}
