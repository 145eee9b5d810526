package kube

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/gandiva-sched/gandiva/client/protocol"
	"github.com/gandiva-sched/gandiva/internal/kube/shared"
)

// devMiniBatch is the length of a mini-batch of the jobs `gandiva kube
// dev` plays.
const devMiniBatch = 100 * time.Millisecond

// playJobs stands in, on the shared nodes of a dev cluster, for the
// processes that kwok does not run: for every running shared pod bound
// to one of them, an in-job client that attaches to the pod's socket
// (made by the node's agent), does a mini-batch every devMiniBatch while
// it runs, and carries out the agent's suspensions and resumptions at
// its boundaries. It ends with its pod (the agent closes the socket).
// It runs until ctx ends.
func playJobs(ctx context.Context, cs kubernetes.Interface, socketDir string, sharedNodes []string, log *slog.Logger) {
	onShared := map[string]bool{}
	for _, n := range sharedNodes {
		onShared[n] = true
	}
	playing := map[types.UID]bool{} // (a pod is played once)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		l, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range l.Items {
				p := &l.Items[i]
				_, isShared := p.Annotations[shared.AnnGPUs]
				if !isShared || !onShared[p.Spec.NodeName] || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || playing[p.UID] {
					continue
				}
				playing[p.UID] = true
				sock := filepath.Join(socketDir, p.Spec.NodeName, string(p.UID), shared.SocketName)
				pod := p.Namespace + "/" + p.Name
				go playJob(ctx, sock, p.UID, pod, log.With("pod", pod))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// playJob is one pod's in-job client (see playJobs).
func playJob(ctx context.Context, sock string, uid types.UID, pod string, log *slog.Logger) {
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
	defer conn.Close()
	go func() { <-ctx.Done(); conn.Close() }()
	send := func(m protocol.Msg) bool {
		_, err := conn.Write(protocol.Encode(m))
		return err == nil
	}
	if !send(protocol.Msg{Kind: protocol.Hello, Version: protocol.Version, PID: os.Getpid(), Hooks: true, PodUID: string(uid), Pod: pod}) {
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
	var done int64
	held := false
	var pending *protocol.Msg // a suspension due at a later boundary
	m, ok := <-msgs
	if !ok || m.Kind != protocol.Welcome {
		log.Warn("dev: the agent did not welcome the pod's stand-in client", "answer", m.Kind, "message", m.Message)
		return
	}
	if m.Hold {
		pending = &protocol.Msg{Kind: protocol.Suspend, At: 1} // as if asked (Seq 0)
	}
	log.Info("dev: playing the pod's process", "gpus", m.GPUs)
	suspend := func(c protocol.Msg) bool {
		held, pending = true, nil
		return send(protocol.Msg{Kind: protocol.Suspended, Seq: c.Seq, Done: done, Bytes: 1 << 20, Released: true})
	}
	tick := time.NewTicker(devMiniBatch)
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
				if !send(protocol.Msg{Kind: protocol.Saved, Seq: m.Seq, Done: done, Bytes: 1 << 20}) || m.Exit {
					return
				}
			}
		case <-tick.C:
			if held {
				continue
			}
			done++ // a mini-batch boundary
			if pending != nil && done >= pending.At {
				if !suspend(*pending) {
					return
				}
				continue
			}
			if done%10 == 1 && !send(protocol.Msg{Kind: protocol.Progress, Done: done, IterTime: devMiniBatch.Seconds()}) {
				return
			}
		}
	}
}
