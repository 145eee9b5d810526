package kube

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/gandiva-sched/gandiva/client/protocol"
	"github.com/gandiva-sched/gandiva/internal/kube/shared"
)

// DevIterTime is the length of a mini-batch of the jobs `gandiva kube
// dev` plays when their Job (or pod) carries no gandiva.io/iter-time.
const DevIterTime = 100 * time.Millisecond

// devWork is what a played job has to do: iters mini-batches (0: it runs
// until its pod is ended) of iterTime each.
type devWork struct {
	iters    int64
	iterTime time.Duration
}

// devWorkOf reads a job's work from the annotations of its Job (or of the
// pod itself when no Job owns it), as the scheduler does: gandiva.io/iters
// and gandiva.io/iter-time; DevIterTime per mini-batch without the latter.
// Values the scheduler would refuse count as absent.
func devWorkOf(ann map[string]string) devWork {
	w := devWork{iterTime: DevIterTime}
	if f, err := strconv.ParseFloat(strings.TrimSpace(ann[AnnIterTime]), 64); err == nil && f > 0 && f <= 86400 {
		w.iterTime = time.Duration(f * float64(time.Second))
	}
	if f, err := strconv.ParseFloat(strings.TrimSpace(ann[AnnIters]), 64); err == nil && f >= 1 && f <= 1e15 {
		w.iters = int64(math.Ceil(f))
	}
	return w
}

// devPlayer plays the processes of the pods of a dev cluster (see
// playJobs).
type devPlayer struct {
	cs        kubernetes.Interface
	dc        dynamic.Interface // nil: JobSets and PyTorchJobs are not read
	socketDir string
	log       *slog.Logger

	// stops ends the plays of exclusive pods (loop only).
	stops map[types.UID]func()

	mu    sync.Mutex
	saved map[string]int64 // a job's (or worker's) last checkpoint, in mini-batches
}

// playJobs stands in for the processes that kwok does not run on the
// nodes of a dev cluster.
//
// On the shared nodes: for every running shared pod, an in-job client
// that attaches to the pod's socket (made by the node's agent), counts
// mini-batches of the job's gandiva.io/iter-time while it runs (not while
// suspended), reports its progress to the agent as the Gandiva client
// does, and carries out the agent's suspensions, resumptions and
// checkpoints at its boundaries.
//
// On the other nodes: for every running pod that requests GPUs and whose
// job (its Job, the JobSet of its Job, or its PyTorchJob) has gandiva.io/iters, a process that counts mini-batches while the
// pod runs and checkpoints when the pod is deleted (a suspension or a
// move: the next pod of the same worker restores it).
//
// Once a job's gandiva.io/iters are done, its process ends as a trainer
// does (a shared one with its last progress to the agent, then the socket
// closed): the pod's exit code 0 (cplane.AnnExit, which kwok turns into
// Succeeded). A job without iters runs until its pod is ended. It runs
// until ctx ends.
func playJobs(ctx context.Context, cs kubernetes.Interface, dc dynamic.Interface, socketDir string, nodes, sharedNodes []string, log *slog.Logger) {
	onShared, onDev := map[string]bool{}, map[string]bool{}
	for _, n := range sharedNodes {
		onShared[n] = true
	}
	for _, n := range nodes {
		onDev[n] = true
	}
	pl := &devPlayer{cs: cs, dc: dc, socketDir: socketDir, log: log, stops: map[types.UID]func(){}, saved: map[string]int64{}}
	defer func() {
		for _, stop := range pl.stops {
			stop()
		}
	}()
	playing := map[types.UID]bool{} // (a pod is played once)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		l, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err == nil {
			running := map[types.UID]bool{}
			for i := range l.Items {
				p := &l.Items[i]
				_, isShared := p.Annotations[shared.AnnGPUs]
				if !onDev[p.Spec.NodeName] || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
					continue
				}
				running[p.UID] = true
				if playing[p.UID] || isShared != onShared[p.Spec.NodeName] || !isShared && podGPUs(p) == 0 {
					continue
				}
				key, ann, err := pl.jobOf(ctx, p)
				if err != nil {
					log.Warn("dev: reading the pod's Job", "pod", p.Namespace+"/"+p.Name, "err", err)
					continue // again at the next tick
				}
				playing[p.UID] = true
				w := devWorkOf(ann)
				switch {
				case isShared:
					go pl.play(ctx, p.DeepCopy(), key, w)
				case w.iters > 0:
					if ix, ok := p.Annotations[batchv1.JobCompletionIndexAnnotation]; ok {
						key += "/" + ix // each worker its own checkpoint
					}
					pctx, stop := context.WithCancel(ctx)
					pl.stops[p.UID] = stop
					go pl.run(pctx, p.DeepCopy(), key, w)
				}
			}
			for uid, stop := range pl.stops {
				if !running[uid] {
					stop() // the pod is deleted or ended: its process checkpoints
					delete(pl.stops, uid)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// podGPUs is the nvidia.com/gpu a pod's containers request.
func podGPUs(p *corev1.Pod) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		if q, ok := c.Resources.Limits[GPU]; ok {
			n += q.Value()
		} else if q, ok := c.Resources.Requests[GPU]; ok {
			n += q.Value()
		}
	}
	return n
}

// run is the process of an exclusive pod (see playJobs): from the
// checkpoint of key, a mini-batch every w.iterTime until w.iters, or
// until ctx ends (the pod is deleted: a checkpoint of what it did).
func (pl *devPlayer) run(ctx context.Context, p *corev1.Pod, key string, w devWork) {
	done := pl.restored(key)
	log := pl.log.With("pod", p.Namespace+"/"+p.Name)
	log.Info("dev: playing the pod's process", "iters", w.iters, "iter_time", w.iterTime, "restored", done)
	tick := time.NewTicker(w.iterTime)
	defer tick.Stop()
	for done < w.iters {
		select {
		case <-ctx.Done():
			pl.save(key, done)
			return
		case <-tick.C:
			done++
		}
	}
	pl.save(key, done)
	log.Info("dev: the pod's process is done", "iters", done)
	pl.exit(ctx, p, log)
}

// jobOf returns the key under which a pod's progress is kept (its Job's
// UID, else its own) and the annotations that describe its work: its
// Job's, or, for a Job of a JobSet (a TrainJob's too), the JobSet's (where
// Gandiva reads them), the key then the JobSet's UID and the Job's name;
// for a PyTorchJob's pod, the PyTorchJob's, the key its UID and the pod's
// replica type and index.
func (pl *devPlayer) jobOf(ctx context.Context, p *corev1.Pod) (string, map[string]string, error) {
	for _, o := range p.OwnerReferences {
		if o.Controller == nil || !*o.Controller {
			continue
		}
		if o.Kind == pytorchJobGVK.Kind && o.APIVersion == pytorchJobGVK.GroupVersion().String() && pl.dc != nil {
			// a PyTorchJob's pod: its replica (type and index) keeps its
			// own checkpoint, as a Job's worker does
			pj, err := pl.dc.Resource(pytorchJobGVR).Namespace(p.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
			if err != nil {
				return "", nil, err
			}
			if pj.GetUID() != o.UID {
				return "", nil, fmt.Errorf("its owner PyTorchJob %s is another object (uid %s, not %s)", o.Name, pj.GetUID(), o.UID)
			}
			return string(pj.GetUID()) + "/" + p.Labels[labelKubeflowReplicaType] + "-" + p.Labels[labelKubeflowReplicaIndex],
				pj.GetAnnotations(), nil
		}
		if o.Kind != "Job" {
			continue
		}
		j, err := pl.cs.BatchV1().Jobs(p.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return "", nil, err
		}
		if ref := metav1.GetControllerOfNoCopy(j); ref != nil && ref.Kind == jobSetGVK.Kind && pl.dc != nil &&
			strings.HasPrefix(ref.APIVersion, jobSetGVK.Group+"/") {
			js, err := pl.dc.Resource(jobSetGVR).Namespace(p.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				return "", nil, err
			}
			return string(js.GetUID()) + "/" + j.Name, js.GetAnnotations(), nil
		}
		return string(j.UID), j.Annotations, nil
	}
	return string(p.UID), p.Annotations, nil
}

// restored returns the mini-batches of key's last checkpoint.
func (pl *devPlayer) restored(key string) int64 {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.saved[key]
}

// save records a checkpoint of key at done mini-batches.
func (pl *devPlayer) save(key string, done int64) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.saved[key] = max(pl.saved[key], done)
}

// play is one pod's in-job client (see playJobs).
func (pl *devPlayer) play(ctx context.Context, p *corev1.Pod, key string, w devWork) {
	pod := p.Namespace + "/" + p.Name
	log := pl.log.With("pod", pod)
	sock := filepath.Join(pl.socketDir, p.Spec.NodeName, string(p.UID), shared.SocketName)
	var conn net.Conn
	for {
		c, err := net.Dial("unix", sock)
		if err == nil {
			conn = c
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
	finished := false
	var done int64
	defer func() {
		conn.Close()
		if finished {
			pl.awaitStatus(ctx, p, done)
			pl.exit(ctx, p, log)
		}
	}()
	go func() { <-ctx.Done(); conn.Close() }()
	send := func(m protocol.Msg) bool {
		_, err := conn.Write(protocol.Encode(m))
		return err == nil
	}
	done = pl.restored(key)
	if !send(protocol.Msg{Kind: protocol.Hello, Version: protocol.Version, PID: os.Getpid(), Hooks: true, PodUID: string(p.UID), Pod: pod, Done: done}) {
		return
	}
	msgs := make(chan protocol.Msg)
	go func() {
		defer close(msgs)
		r := bufio.NewReaderSize(conn, protocol.MaxLine)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			m, err := protocol.Decode(line)
			if err != nil {
				continue
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	held := false
	var pending *protocol.Msg // a suspension due at a later boundary
	m, ok := <-msgs
	if !ok || m.Kind != protocol.Welcome {
		log.Warn("dev: the agent did not welcome the pod's stand-in client", "answer", m.Kind, "message", m.Message)
		return
	}
	if m.Hold {
		pending = &protocol.Msg{Kind: protocol.Suspend, At: done + 1} // as if asked (Seq 0)
	}
	log.Info("dev: playing the pod's process", "gpus", m.GPUs, "iters", w.iters, "iter_time", w.iterTime, "restored", done)
	suspend := func(c protocol.Msg) bool {
		held, pending = true, nil
		return send(protocol.Msg{Kind: protocol.Suspended, Seq: c.Seq, Done: done, Bytes: 1 << 20, Released: true})
	}
	report := time.Duration(protocol.DefaultReportEvery * float64(time.Second))
	var lastReport time.Time
	start := done
	tick := time.NewTicker(w.iterTime)
	defer tick.Stop()
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				return // the agent closed the socket: the pod ended
			}
			switch m.Kind {
			case protocol.Suspend:
				if m.At > done {
					pending = &m
				} else if !suspend(m) {
					return
				}
			case protocol.Resume:
				held = false
				if !send(protocol.Msg{Kind: protocol.Resumed, Seq: m.Seq, Done: done}) {
					return
				}
			case protocol.Checkpoint:
				pl.save(key, done)
				if !send(protocol.Msg{Kind: protocol.Saved, Seq: m.Seq, Done: done, Bytes: 1 << 20}) || m.Exit {
					return
				}
			}
		case now := <-tick.C:
			if held {
				continue
			}
			done++ // a mini-batch boundary
			if w.iters > 0 && done >= w.iters {
				// the training loop ends: the client's last progress
				send(protocol.Msg{Kind: protocol.Progress, Done: done, IterTime: w.iterTime.Seconds()})
				finished = true
				log.Info("dev: the pod's process is done", "iters", done)
				return
			}
			if pending != nil && done >= pending.At {
				if !suspend(*pending) {
					return
				}
				continue
			}
			if done == start+1 || now.Sub(lastReport) >= report {
				lastReport = now
				if !send(protocol.Msg{Kind: protocol.Progress, Done: done, IterTime: w.iterTime.Seconds()}) {
					return
				}
			}
		}
	}
}

// awaitStatus waits, for at most devExitDelay, until the agent has
// published a shared pod's last progress (done mini-batches): a
// process's exit reaches the kubelet after its socket closed, and the
// agent stops serving a pod once it has ended.
func (pl *devPlayer) awaitStatus(ctx context.Context, p *corev1.Pod, done int64) {
	ctx, cancel := context.WithTimeout(ctx, devExitDelay)
	defer cancel()
	for {
		q, err := pl.cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err == nil {
			if st, ok := statusOf(q); ok && st.Done >= done {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// devExitDelay bounds the wait of awaitStatus.
const devExitDelay = 10 * time.Second

// exit ends a played pod whose process is done: its exit code 0, which
// kwok turns into the phase Succeeded. It retries until ctx ends or the
// pod is gone.
func (pl *devPlayer) exit(ctx context.Context, p *corev1.Pod, log *slog.Logger) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{cplane.AnnExit: "0"}}})
	if err != nil {
		panic(fmt.Sprintf("dev: encoding a patch: %v", err)) // a map of strings
	}
	for {
		_, err := pl.cs.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err == nil || ctx.Err() != nil || apierrors.IsNotFound(err) {
			return
		}
		log.Warn("dev: marking the pod's exit", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}
