package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
)

// ensureAccount creates a system account (and its group) if it is
// missing, and returns its uid and gid. An account it created is removed
// (userdel, which removes its group too) when the test ends, after the
// test's own deferred calls have stopped every process running as it; one
// that existed before is left as it was.
func ensureAccount(t *testing.T, name string) (int, int) {
	t.Helper()
	if _, err := user.Lookup(name); err != nil {
		out, err := exec.Command("useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput()
		if err != nil {
			t.Fatalf("useradd %s: %v\n%s", name, err, out)
		}
		t.Cleanup(func() {
			if out, err := exec.Command("userdel", name).CombinedOutput(); err != nil {
				t.Errorf("userdel %s (the account this test added): %v\n%s", name, err, out)
			}
		})
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uid, gid
}

// needRoot skips a test that must create accounts and switch to them,
// unless it runs as root; under CI (CI=true, which runs as root) it fails
// instead, so that the isolation is always tested there.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true but not root: the isolation test must run (it creates accounts and runs jobs as them)")
	}
	t.Skip("needs root: it creates accounts (useradd) and runs jobs as them")
}

// upProc is a `gandiva up` process.
type upProc struct {
	cmd       *exec.Cmd
	url, data string
	work      string
	log       string
}

// TestIsolation reproduces attacks that once worked on the live scheduler
// and shows them refused, with `gandiva up` run as root (as they were), its
// jobs under real accounts: alice's mapped by --user-map, bob's by the
// --run-as pattern.
//
//  1. `gandiva submit --token-file alice.tok --no-prerun -- sh -c 'id; cat
//     $DATA/admin.token'` then `gandiva logs j1` printed uid=0 and the
//     admin token: now the job runs as alice's account, not root, and cat
//     is refused; no file of the server's or the agent's (tokens, the
//     node's credential, the logs) is readable by a job, and the agent's
//     secrets are not in its environment; bob's jobs cannot read alice's
//     working directory, checkpoints or logs.
//  2. With the shared agent token, registering under the node's name,
//     pulling its assignments (with alice's env) or posting reports for
//     alice's job is refused; enrolling the name again too.
//
// (3, the connection flood, is TestConnectionFlood.) A working directory
// that does not exist fails the job, as the job's error, and is not made.
func TestIsolation(t *testing.T) {
	needRoot(t)
	// Accounts of this run's own (removed at its end), so that runs side
	// by side never share or remove each other's.
	pre := fmt.Sprintf("gdv-e2e%d-", os.Getpid())
	aliceAcct := pre + "alice"
	aliceUID, _ := ensureAccount(t, aliceAcct)
	bobUID, _ := ensureAccount(t, pre+"bob")
	if aliceUID == bobUID || aliceUID == 0 || bobUID == 0 {
		t.Fatalf("accounts: alice %d, bob %d", aliceUID, bobUID)
	}
	top := openDir(t)
	data := filepath.Join(top, "data")
	work := filepath.Join(top, "work")
	usermap := filepath.Join(top, "users")
	os.WriteFile(usermap, []byte("# gandiva user → OS account\nalice "+aliceAcct+"\n"), 0o644)
	addr := freePort(t)
	u := &upProc{url: "http://" + addr, data: data, work: work, log: filepath.Join(top, "up.log")}
	logf, _ := os.Create(u.log)
	u.cmd = exec.Command(bin, "up", "--listen", addr, "--data-dir", data, "--work-dir", work, "--policy", "fifo",
		"--fake-gpus", "2xV100", "--user-map", usermap, "--run-as", pre+"{user}", "--retry-backoff", "600")
	// Secrets in the agent's environment must not reach a job.
	u.cmd.Env = append(os.Environ(), "GANDIVA_AGENT_TOKEN=gdv_agent_secret_in_env", "AWS_SECRET_ACCESS_KEY=hunter2")
	u.cmd.Stdout, u.cmd.Stderr = logf, logf
	if err := u.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		u.cmd.Process.Signal(syscall.SIGTERM)
		u.cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(u.log)
			t.Logf("up's log:\n%s", b)
		}
	}()
	waitHealthy(t, u.url, 30*time.Second)
	readTok := func(name string) string {
		b, err := os.ReadFile(filepath.Join(data, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	adminTok, agentTok := readTok("admin.token"), readTok("agent.token")
	admin := api.NewClient(u.url, adminTok)
	waitNodes(t, admin, 1, 20*time.Second)
	ns, _ := admin.Nodes(context.Background())
	node := ns[0].Name

	// Tokens for alice and bob, in files, as people keep them.
	tokFile := func(user string) (string, string) {
		out := mustCLI(t, u.url, adminTok, "token", "create", "--user", user)
		tok := firstLine(out)
		path := filepath.Join(top, user+".tok")
		os.WriteFile(path, []byte(tok+"\n"), 0o600)
		return tok, path
	}
	aliceTok, aliceFile := tokFile("alice")
	bobTok, _ := tokFile("bob")
	_ = bobTok

	// 1. The original attack's command, through the CLI.
	out, err := exec.Command(bin, "submit", "--server", u.url, "--token-file", aliceFile, "--no-prerun", "--workdir", "/tmp", "--job-account", aliceAcct,
		"--", "sh", "-c", "id; cat "+data+"/admin.token").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "j1" {
		t.Fatalf("gandiva submit: %v %s", err, out)
	}
	logs := waitLog(t, u.url, aliceFile, "j1", "Permission denied")
	if !strings.Contains(logs, fmt.Sprintf("uid=%d(%s)", aliceUID, aliceAcct)) || strings.Contains(logs, "uid=0") {
		t.Fatalf("gandiva logs j1: want alice's uid %d, not root:\n%s", aliceUID, logs)
	}
	if strings.Contains(logs, adminTok) || strings.Contains(logs, "gdv_") {
		t.Fatalf("gandiva logs j1 shows a token:\n%s", logs)
	}
	t.Logf("gandiva logs j1:\n%s", logs)

	// What a job can reach: nothing of the server's or the agent's; its
	// environment holds none of the agent's secrets.
	alice := api.NewClient(u.url, aliceTok)
	probe := strings.Join([]string{
		"echo alice-secret > ./secret", "echo alice-secret > $GANDIVA_CHECKPOINT_DIR/secret", "echo alice-secret-in-log",
		"id -G", "umask", "env",
		// (The markers are split in the command, which the log's header shows.)
		"for f in " + strings.Join([]string{data + "/agent.token", data + "/gandiva.db", data + "/node.credential"}, " ") + `; do cat $f >/dev/null 2>&1 && echo "RE""AD $f" || echo "DENI""ED $f"; done`,
		"ls " + work + `/logs >/dev/null 2>&1 && echo "RE""AD logs" || echo "DENI""ED logs"`,
	}, "; ")
	a2, err := alice.Submit(context.Background(), &api.JobRequest{Name: "probe", Command: []string{"sh", "-c", probe}, GPUs: 1, PreRun: ptr(false)})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, admin, a2.ID, "finished")
	logs = waitLog(t, u.url, aliceFile, a2.ID, "DENIED logs")
	for _, want := range []string{"DENIED " + data + "/agent.token", "DENIED " + data + "/gandiva.db", "DENIED " + data + "/node.credential",
		"DENIED logs", "\nUSER=" + aliceAcct + "\n", "\n0077\n"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the probe's log lacks %q:\n%s", strings.TrimSpace(want), logs)
		}
	}
	for _, bad := range []string{"READ ", "gdv_agent_secret_in_env", "hunter2", "HOME=/root", "GANDIVA_AGENT_TOKEN"} {
		if strings.Contains(logs, bad) {
			t.Errorf("the probe's log shows %q:\n%s", bad, logs)
		}
	}
	if g := groupsLine(logs); g != strconv.Itoa(gidOf(t, aliceAcct)) {
		t.Errorf("the job's groups are %q: want its own group only (supplementary groups cleared)", g)
	}
	// On disk: alice's directories are hers alone; the logs the agent's.
	// (Checkpoints and logs are under the store's name: one new store.)
	names, _ := filepath.Glob(filepath.Join(work, "checkpoints", "c????????????????"))
	if len(names) != 1 {
		t.Fatalf("checkpoint root %s holds %q: want one store's directory", filepath.Join(work, "checkpoints"), names)
	}
	cluster := filepath.Base(names[0])
	ckpt, logDir := filepath.Join(work, "checkpoints", cluster), filepath.Join(work, "logs", cluster)
	for _, c := range []struct {
		path string
		uid  int
		mode os.FileMode
	}{
		{filepath.Join(work, "jobs", "alice"), aliceUID, 0o700},
		{filepath.Join(work, "jobs", "alice", a2.ID), aliceUID, 0o700},
		{ckpt, 0, 0o711},
		{filepath.Join(ckpt, "alice"), aliceUID, 0o700},
		{filepath.Join(work, "logs"), 0, 0o700},
		{logDir, 0, 0o700},
		{data, 0, 0o700},
		{filepath.Join(data, "admin.token"), 0, 0o600},
		{filepath.Join(data, "node.credential"), 0, 0o600}, // (up's agent keeps it with the store)
	} {
		st, err := os.Stat(c.path)
		if err != nil {
			t.Errorf("%s: %v", c.path, err)
			continue
		}
		if uid := int(st.Sys().(*syscall.Stat_t).Uid); uid != c.uid || st.Mode().Perm() != c.mode {
			t.Errorf("%s: owner %d, mode %04o; want %d, %04o", c.path, uid, st.Mode().Perm(), c.uid, c.mode)
		}
	}

	// Bob's job cannot read alice's working directory, checkpoints or logs.
	steal := strings.Join([]string{"id -u",
		"cat " + filepath.Join(work, "jobs", "alice", a2.ID, "secret"),
		"cat " + filepath.Join(ckpt, "alice", a2.ID, "secret"),
		"ls " + filepath.Join(work, "jobs", "alice"),
		"cat " + filepath.Join(logDir, a2.ID) + "/*",
		"echo done"}, "; ")
	bob := api.NewClient(u.url, bobTok)
	b1, err := bob.Submit(context.Background(), &api.JobRequest{Name: "steal", Command: []string{"sh", "-c", steal}, GPUs: 1, PreRun: ptr(false)})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, admin, b1.ID, "finished")
	rc, err := bob.Logs(context.Background(), b1.ID, api.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := readAll(rc)
	if strings.Contains(b, "alice-secret") || strings.Count(b, "Permission denied") < 4 || !strings.Contains(b, "\n"+strconv.Itoa(bobUID)+"\n") {
		t.Errorf("bob's job (uid %d) reached alice's files, or did not run as bob:\n%s", bobUID, b)
	}
	if _, err := bob.Logs(context.Background(), a2.ID, api.LogOptions{}); !api.IsStatus(err, 403) {
		t.Errorf("bob reading alice's logs through the API: %v, want 403", err)
	}

	// A working directory that does not exist: the job's error, not made.
	missing := filepath.Join(top, "no", "such", "dir")
	m1, err := alice.Submit(context.Background(), &api.JobRequest{Name: "nowhere", Command: []string{"true"}, GPUs: 1, PreRun: ptr(false), WorkDir: missing})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		j, _ := admin.Get(context.Background(), m1.ID)
		if j.Reason != "" && strings.Contains(j.Reason, "work_dir: "+missing) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a job with a missing workdir: %s %q, want its reason to name work_dir", j.State, j.Reason)
		}
	}
	if _, err := os.Stat(filepath.Join(top, "no")); !os.IsNotExist(err) {
		t.Errorf("the agent made the missing working directory (%v)", err)
	}

	// 2. The shared agent token cannot act for the node, nor take it over.
	reg := fmt.Sprintf(`{"name": %q, "gpus": [{"index": 0, "type": "V100", "mem_gib": 16}, {"index": 1, "type": "V100", "mem_gib": 16}], "incarnation": "evil", "addr": "http://127.0.0.1:1", "log_key": "0123456789abcdef"}`, node)
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/v1/agent/register", reg, 403},
		{"GET", "/v1/agent/assignments?node=" + node + "&session=x&version=0", "", 403},
		{"POST", "/v1/agent/reports", fmt.Sprintf(`{"node": %q, "session": "x", "reports": [{"job": %q, "attempt": 1, "kind": "exited", "outcome": "finished"}]}`, node, a2.ID), 403},
		{"POST", "/v1/agent/enrol", fmt.Sprintf(`{"name": %q}`, node), 409},
	} {
		if st := rawCall(t, u.url, agentTok, c.method, c.path, c.body); st != c.status {
			t.Errorf("%s %s with the shared agent token: %d, want %d", c.method, c.path, st, c.status)
		}
	}
	if ns, _ := admin.Nodes(context.Background()); len(ns) != 1 || !ns[0].Up {
		t.Errorf("the node after the attempts: %+v", ns)
	}
}

func ptr[T any](v T) *T { return &v }

// waitLog polls a job's log (as the CLI prints it) until it holds want.
func waitLog(t *testing.T, url, tokenFile, id, want string) string {
	t.Helper()
	var out []byte
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		out, _ = exec.Command(bin, "logs", "--server", url, "--token-file", tokenFile, id).CombinedOutput()
		if strings.Contains(string(out), want) {
			return string(out)
		}
	}
	t.Fatalf("gandiva logs %s never showed %q:\n%s", id, want, out)
	return ""
}

func readAll(rc interface {
	Read([]byte) (int, error)
	Close() error
}) (string, error) {
	defer rc.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := rc.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String(), nil
		}
	}
}

// groupsLine is the output of `id -G` in a probe's log (the line after
// the one that ends in alice-secret-in-log).
func groupsLine(log string) string {
	lines := strings.Split(log, "\n")
	for i, l := range lines {
		if l == "alice-secret-in-log" && i+1 < len(lines) {
			return strings.TrimSpace(lines[i+1])
		}
	}
	return ""
}

func gidOf(t *testing.T, name string) int {
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	gid, _ := strconv.Atoi(u.Gid)
	return gid
}

// rawCall makes one API call and returns its status.
func rawCall(t *testing.T, url, token, method, path, body string) int {
	t.Helper()
	rq, _ := http.NewRequest(method, url+path, strings.NewReader(body))
	rq.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(rq)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
