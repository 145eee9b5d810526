package jobproc

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/client/protocol"
)

// needRoot skips a test that runs jobs as another account unless it runs
// as root; under CI (CI=true, which runs as root) it fails instead.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true but not root: this test runs jobs as another account")
	}
	t.Skip("needs root to run a job as another account")
}

const nobody = 65534

// hostileNode makes a node directory for a job that runs as nobody: its
// working and checkpoint directories are nobody's (as the agent makes
// them under WORK/jobs/USER and CKPT/USER), and rootOnly is a directory
// only root may enter, holding a valid checkpoint ("secret").
func hostileNode(t *testing.T) (top, work, ckpt, rootOnly string) {
	t.Helper()
	top, err := os.MkdirTemp("", "jobproc-hostile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	os.Chmod(top, 0o755)
	work, ckpt, rootOnly = filepath.Join(top, "work"), filepath.Join(top, "ckpt"), filepath.Join(top, "root-only")
	for _, d := range []string{work, ckpt} {
		os.Mkdir(d, 0o700)
		if err := os.Chown(d, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := protocol.WriteCheckpoint(filepath.Join(rootOnly, "secret"), protocol.Meta{Done: 99}, func(w io.Writer) error {
		_, err := w.Write([]byte("root's own state"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	os.Chmod(rootOnly, 0o700)
	return top, work, ckpt, rootOnly
}

// moveWithoutClient starts s (a job without the in-job client that
// plants its traps, then touches "planted" and sleeps), suspends it by
// signal once planted, and resumes it on another GPU: the agent then looks
// into its checkpoint directory, as root, to tell whether it restarts from
// a checkpoint. It returns the Resumption (or the error) and the Proc.
func moveWithoutClient(t *testing.T, s Spec) (Resumption, error, *Proc) {
	t.Helper()
	p, err := Start(ctxT(t, 30*time.Second), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // (never blocking: Kill blocked before the fix)
		go p.Kill()
		select {
		case <-p.Done():
		case <-time.After(60 * time.Second):
		}
	})
	planted := filepath.Join(s.WorkDir, "planted")
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(planted); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(s.LogPath)
			t.Fatalf("the job did not plant its traps:\n%s", b)
		}
		select {
		case <-p.Done():
			t.Fatalf("the job ended: %+v", p.Exit())
		case <-time.After(5 * time.Millisecond):
		}
	}
	if sus, err := p.Suspend(ctxT(t, 30*time.Second), SuspendOptions{}); err != nil || sus.Mode != Signal {
		t.Fatalf("suspension %+v %v", sus, err)
	}
	res, err := p.Resume(ctxT(t, 10*time.Second), []int{1})
	return res, err, p
}

// killPromptly kills p and fails the test if it does not end: a FIFO in a
// job's checkpoint directory wedged the supervisor, and Kill (the agent's
// killAll: lease expiry, SIGTERM) blocked for over 100 s.
func killPromptly(t *testing.T, p *Proc) {
	t.Helper()
	killed := make(chan struct{})
	go func() { p.Kill(); close(killed) }()
	select {
	case <-killed:
	case <-time.After(60 * time.Second):
		t.Fatal("Kill blocked")
	}
	select {
	case <-p.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("the Proc did not end after Kill")
	}
}

// TestRootAgentFollowsNoLinkOfTheJob: a job running as
// nobody puts in its checkpoint directory links to where only root may
// go (the metadata, the payload, the lock file), and the root agent looks
// there when it moves the job: it reads nothing through them (the job
// restarts from scratch, not from root's checkpoint) and creates nothing
// where they point. Before, it reported a restart from root's checkpoint
// and created root-only/made as root.
func TestRootAgentFollowsNoLinkOfTheJob(t *testing.T) {
	needRoot(t)
	top, work, ckpt, rootOnly := hostileNode(t)
	secret := filepath.Join(rootOnly, "secret")
	m, err := protocol.ProbeCheckpoint(secret)
	if err != nil {
		t.Fatal(err)
	}
	made := filepath.Join(rootOnly, "made")
	for _, c := range []struct{ name, plant string }{
		{"metadata and lock", "ln -s " + filepath.Join(secret, protocol.MetaFile) + " $CK/" + protocol.MetaFile +
			"; ln -s " + made + " $CK/" + protocol.LockFile +
			"; printf %s 'root'\"'\"'s own state' > $CK/" + m.File},
		{"payload", "cp " + filepath.Join(top, "meta.json") + " $CK/" + protocol.MetaFile +
			"; ln -s " + filepath.Join(secret, m.File) + " $CK/" + m.File},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.RemoveAll(ckpt)
			os.Mkdir(ckpt, 0o700)
			os.Chown(ckpt, nobody, nobody)
			os.Remove(filepath.Join(work, "planted"))
			b, _ := os.ReadFile(filepath.Join(secret, protocol.MetaFile))
			os.WriteFile(filepath.Join(top, "meta.json"), b, 0o644)
			s := Spec{Job: "hostile", Attempt: 1, WorkDir: work, CheckpointDir: ckpt, LogPath: filepath.Join(top, "logs", "j.log"),
				Command:    []string{"sh", "-c", "CK=$GANDIVA_CHECKPOINT_DIR; " + c.plant + "; touch planted; exec sleep 1000"},
				Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}},
				BaseEnv:    []string{"PATH=/usr/bin:/bin"}, GPUs: []int{0}, ClientDeadline: 20 * time.Millisecond}
			res, err, p := moveWithoutClient(t, s)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Restarted || !res.FromScratch {
				t.Errorf("resumption %+v: the agent took root's checkpoint, read through the job's links, for the job's", res)
			}
			if _, err := os.Lstat(made); err == nil {
				t.Errorf("the agent created %s, as root, through the job's link", made)
				os.Remove(made)
			}
			killPromptly(t, p)
		})
	}
}

// TestFIFOInCheckpointDirDoesNotWedgeKill: a FIFO in
// place of the job's checkpoint metadata wedged the root agent's look (an
// open for reading waits for a writer), and with it the Proc: Kill
// blocked. Now the look does not open it, and Kill goes through.
func TestFIFOInCheckpointDirDoesNotWedgeKill(t *testing.T) {
	needRoot(t)
	top, work, ckpt, _ := hostileNode(t)
	s := Spec{Job: "fifo", Attempt: 1, WorkDir: work, CheckpointDir: ckpt, LogPath: filepath.Join(top, "logs", "j.log"),
		Command: []string{"sh", "-c", "mkfifo $GANDIVA_CHECKPOINT_DIR/" + protocol.MetaFile +
			"; mkfifo $GANDIVA_CHECKPOINT_DIR/" + protocol.LockFile + "; touch planted; exec sleep 1000"},
		Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}},
		BaseEnv:    []string{"PATH=/usr/bin:/bin"}, GPUs: []int{0}, ClientDeadline: 20 * time.Millisecond}
	res, err, p := moveWithoutClient(t, s)
	if err != nil && !strings.Contains(err.Error(), context.DeadlineExceeded.Error()) {
		t.Fatal(err)
	}
	killPromptly(t, p)
	if err != nil {
		t.Fatalf("the move did not finish: %v", err)
	}
	if !res.FromScratch {
		t.Errorf("resumption %+v, want from scratch", res)
	}
}

// TestKillDuringAHungLook: whatever the look into the checkpoint
// directory waits for (a hung shared file system), Kill goes through and
// the Proc ends at once, as killed; the look's late answer changes
// nothing.
func TestKillDuringAHungLook(t *testing.T) {
	looking, release := make(chan struct{}), make(chan struct{})
	probeCheckpoint = func(string) (protocol.Meta, error) {
		close(looking)
		<-release
		return protocol.Meta{}, nil
	}
	t.Cleanup(func() { probeCheckpoint = protocol.ProbeCheckpoint })
	defer close(release)
	dir := t.TempDir()
	s := Spec{Job: "hung", Attempt: 1, WorkDir: dir, CheckpointDir: filepath.Join(dir, "ckpt"), LogPath: filepath.Join(dir, "logs", "j.log"),
		Command: []string{"sh", "-c", "touch planted; exec sleep 1000"}, GPUs: []int{0}, ClientDeadline: 20 * time.Millisecond}
	p, err := Start(ctxT(t, 30*time.Second), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		go p.Kill()
		select {
		case <-p.Done():
		case <-time.After(60 * time.Second):
		}
	})
	for {
		if _, err := os.Stat(filepath.Join(dir, "planted")); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := p.Suspend(ctxT(t, 30*time.Second), SuspendOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go p.Resume(ctx, []int{1}) // a move: the old process ends, then the look
	defer cancel()
	select {
	case <-looking:
	case <-time.After(60 * time.Second):
		t.Fatal("the move did not look into the checkpoint directory")
	}
	killPromptly(t, p)
	if e := p.Exit(); e.Outcome != Killed {
		t.Fatalf("exit %+v, want killed", e)
	}
}
