package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kubecli"
	"github.com/gandiva-sched/gandiva/internal/server"
	"github.com/gandiva-sched/gandiva/internal/visible"
)

// evil is what a hostile user, job or node puts in the strings the CLI
// prints: an OSC that sets the terminal's title, a screen clear, a
// carriage return and a backspace that overwrite what came before, a line
// feed and a tab that break a table, DEL, a C1 CSI, the bidi override and
// isolate that reorder text (Trojan Source), a zero-width space.
const evil = "\x1b]0;pwned\x07\x1b[2J\rX\bY\nZ\tW\x7f\u009b31m\u202eevil\u2066\u200b"

// rawHidden returns the first character of out that a terminal obeys or
// that reorders text (other than the line feeds that end lines), and where.
func rawHidden(out string) (rune, int, bool) {
	for i, r := range out {
		if r != '\n' && (visible.Hidden(r) || (r == utf8.RuneError && !strings.HasPrefix(out[i:], "\uFFFD"))) {
			return r, i, true
		}
	}
	return 0, 0, false
}

// fakeAPI answers the client commands with crafted records whose every
// string a user, job or node controls holds evil; the logs of job j1 are
// evil too.
func fakeAPI(t *testing.T) *httptest.Server {
	t.Helper()
	now := time.Now()
	job := api.Job{ID: "j1" + evil, Name: "name" + evil, User: "alice" + evil, Group: "g" + evil, Command: []string{"python" + evil, "train.py", evil},
		Env: map[string]string{"K": evil}, WorkDir: "/home/alice/" + evil, GPUs: 1, State: "queued" + evil, Reason: "reason " + evil,
		PreRun: "pending" + evil, Starting: "starting" + evil, Submitted: now, Notes: []string{"note " + evil},
		Workers: []api.Worker{{Node: "n1" + evil, GPUs: []int{0}, Phase: "running"}},
		History: []api.Change{{At: now, From: "queued" + evil, To: "running" + evil, Reason: "why " + evil}},
		AttemptList: []api.Attempt{{N: 1, Ranks: []api.AttemptRank{{Node: "n1" + evil, GPUs: []int{0}}}, Outcome: "failed: " + evil},
			{N: 2, Ranks: []api.AttemptRank{{Node: "n2" + evil}}, Current: true}},
		ETA: &api.ETA{Note: "eta " + evil, Forecast: now}}
	expl := api.Explanation{Job: job.ID, State: "queued", Policy: "fifo" + evil, Summary: "summary " + evil, Queue: "queue " + evil,
		Position: 3, Waiting: 3, AheadGPUs: 2, Ahead: []string{"ahead" + evil, "ahead2" + evil}, PreRun: "pending" + evil,
		FreeGPUs: 0, TotalGPUs: 4, ETA: &api.ETA{Note: "eta " + evil, Forecast: now},
		Servers: []api.ServerReason{{Node: "n1" + evil, Why: "full " + evil}, {Node: "n2", Fits: true, Why: "fits"}}}
	nodes := api.NodeList{Nodes: []api.Node{{Name: "n1" + evil, GPUType: "V100" + evil, GPUs: 4, FreeGPUs: 1, Up: true, Reason: "r " + evil,
		LastSeen: now, Jobs: []string{"j1" + evil}}, {Name: "n2", GPUType: "A100", GPUs: 8, Up: true}}}
	tokens := api.TokenList{Tokens: []api.TokenInfo{{ID: "abc" + evil, User: "alice" + evil, Kind: "agent" + evil, Label: "l" + evil, Created: now}}}
	mux := http.NewServeMux()
	reply := func(v any) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(v)
		}
	}
	mux.HandleFunc("GET /v1/jobs", reply(api.JobList{Jobs: []api.Job{job, job}}))
	mux.HandleFunc("GET /v1/jobs/j1", reply(job))
	mux.HandleFunc("POST /v1/jobs/j1/cancel", reply(job))
	mux.HandleFunc("GET /v1/jobs/j1/explain", reply(expl))
	mux.HandleFunc("GET /v1/jobs/j1/logs", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "step 1\n"+evil+"\nstep 2\t\xe2\x80") })
	mux.HandleFunc("GET /v1/nodes", reply(nodes))
	mux.HandleFunc("GET /v1/tokens", reply(tokens))
	mux.HandleFunc("DELETE /v1/tokens/abc", reply(tokens.Tokens[0]))
	mux.HandleFunc("GET /v1/jobs/bad", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(map[string]any{"error": api.Error{Code: "not_found", Message: "job " + evil + " not found"}})
	})
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs
}

// TestCLIShowsHostileStringsInertly: status, jobs, explain, nodes, cancel
// and the token commands print no control, bidi or other invisible format
// character that a user, job or node put in a name, command, work
// directory, GPU type or reason, in text or --json, and tables keep one
// line a row (escape sequences once reached an admin's terminal
// through status and nodes).
func TestCLIShowsHostileStringsInertly(t *testing.T) {
	hs := fakeAPI(t)
	for _, c := range []struct {
		args  []string
		lines int // lines of text output; 0: not checked
		want  string
	}{
		{[]string{"status", "j1"}, 0, `\x1b]0;pwned\a\x1b[2J\rX\bY\nZ\tW\x7f\u009b31m\u202eevil\u2066\u200b`},
		{[]string{"jobs"}, 3, `name\x1b]0;pwned`},
		{[]string{"explain", "j1"}, 0, `ahead2\x1b`},
		{[]string{"nodes"}, 3, `4×V100\x1b]0;pwned`},
		{[]string{"cancel", "j1"}, 1, ""},
		{[]string{"token", "list"}, 2, ""},
		{[]string{"token", "revoke", "abc"}, 1, ""},
	} {
		for _, asJSON := range []bool{false, true} {
			args := append(append([]string{}, c.args...), "--server", hs.URL, "--token", "gdv_test")
			if asJSON {
				args = append(args, "--json")
			}
			out, errOut, err := run(t, args...)
			if err != nil {
				t.Fatalf("gandiva %s: %v\n%s", strings.Join(args, " "), err, errOut)
			}
			if r, i, bad := rawHidden(out + errOut); bad {
				t.Errorf("gandiva %s prints %U raw at byte %d:\n%q", strings.Join(args, " "), r, i, out)
			}
			if asJSON {
				if (c.args[0] == "status" || c.args[0] == "jobs") && !json.Valid([]byte(out)) {
					t.Errorf("gandiva %s --json: not JSON: %s", c.args[0], out)
				}
				continue
			}
			if c.want != "" && !strings.Contains(out, c.want) {
				t.Errorf("gandiva %s: want %q shown in:\n%s", strings.Join(c.args, " "), c.want, out)
			}
			if n := strings.Count(out, "\n"); c.lines > 0 && n != c.lines {
				t.Errorf("gandiva %s: %d lines, want %d:\n%s", strings.Join(c.args, " "), n, c.lines, out)
			}
		}
	}
	// --json keeps the value exact, as JSON escapes
	out, _, err := run(t, "status", "j1", "--json", "--server", hs.URL, "--token", "gdv_test")
	var j api.Job
	if err != nil || json.Unmarshal([]byte(out), &j) != nil || j.Command[2] != evil || j.WorkDir != "/home/alice/"+evil {
		t.Fatalf("status --json changed the job: %v %q", err, out)
	}
	// a server error that quotes what a user sent
	_, _, err = run(t, "status", "bad", "--server", hs.URL, "--token", "gdv_test")
	if err == nil {
		t.Fatal("status of a missing job: no error")
	}
	if r, i, bad := rawHidden(errorText(err)); bad {
		t.Errorf("the error prints %U raw at byte %d: %q", r, i, errorText(err))
	}
}

// TestKubePrintHostile: the --kube views show Kubernetes objects' strings
// (event messages, reasons, names) inertly too.
func TestKubePrintHostile(t *testing.T) {
	now := time.Now()
	v := kube.JobView{Namespace: "team-a", Name: "a" + evil, Kind: "Job", Created: now, GPUs: 1, State: "pending" + evil, Reason: "r " + evil,
		Placement: "gpu-0" + evil, ETA: "end ~" + evil, Pods: []kube.PodView{{Name: "p" + evil, Node: "gpu-0" + evil, Phase: "Pending" + evil, Assign: "x" + evil,
			Agent: "ag" + evil, AgentError: "e" + evil}},
		Events: []kube.EventView{{At: now, Object: "pod/p" + evil, Reason: "R" + evil, Message: "m " + evil, Count: 2}}}
	var b bytes.Buffer
	if err := kubecli.PrintJobs(&b, []kube.JobView{v}, now); err != nil {
		t.Fatal(err)
	}
	kubecli.PrintStatus(&b, v)
	kubecli.PrintExplain(&b, v)
	v.Reason = "" // (the ETA, a pod owner's text too, shows instead)
	kubecli.PrintExplain(&b, v)
	if err := kubecli.PrintJobs(&b, []kube.JobView{v}, now); err != nil {
		t.Fatal(err)
	}
	if r, i, bad := rawHidden(b.String()); bad {
		t.Fatalf("the kube views print %U raw at byte %d:\n%q", r, i, b.String())
	}
}

// TestHostileJobOnRealServer: a job submitted through the API directly
// (past the CLI's checks) with escape sequences in its command and work
// directory is accepted, as a command may hold any text, and status, jobs
// and explain show them escaped; a name or group with a bidi override or
// an escape is refused with a 400 that names the field, and so is an agent
// token's label (bidi characters used to be accepted in job names).
func TestHostileJobOnRealServer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	s, url, wait, err := startServer(ctx, server.Config{DataDir: dir, Policy: "fifo"}, "127.0.0.1:0", false, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); wait() }()
	cl := api.NewClient(url, s.AdminToken)
	// a node (registered, never serving: the jobs wait)
	cred, err := api.NewClient(url, s.AgentToken).Enrol(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.NewClient(url, cred.Token).Register(ctx, &api.Registration{Name: "n1", GPUs: []api.GPU{{Index: 0, Type: "V100", MemGiB: 16}},
		Addr: "http://127.0.0.1:9", LogKey: strings.Repeat("k", 32), Incarnation: "i1"}); err != nil {
		t.Fatal(err)
	}
	j, err := cl.Submit(ctx, &api.JobRequest{Name: "plain", Command: []string{"python\x1b]0;pwned\x07", "train.py", "\x1b[2J\u202eevil"},
		WorkDir: "/tmp/\x1b[31mred\r", GPUs: 1})
	if err != nil {
		t.Fatalf("a command with escape sequences (it may hold any text): %v", err)
	}
	for _, args := range [][]string{{"status", j.ID}, {"jobs"}, {"explain", j.ID}, {"status", j.ID, "--json"}, {"jobs", "--json"}} {
		out, errOut, err := run(t, append(args, "--server", url, "--token", s.AdminToken)...)
		if err != nil {
			t.Fatalf("gandiva %s: %v\n%s", strings.Join(args, " "), err, errOut)
		}
		if r, i, bad := rawHidden(out); bad {
			t.Errorf("gandiva %s prints %U raw at byte %d:\n%q", strings.Join(args, " "), r, i, out)
		}
		if args[0] == "status" && len(args) == 2 && (!strings.Contains(out, `python\x1b]0;pwned\a train.py \x1b[2J\u202eevil`) || !strings.Contains(out, `/tmp/\x1b[31mred\r`)) {
			t.Errorf("gandiva status does not show the command and workdir escaped:\n%s", out)
		}
	}
	for _, c := range []struct {
		rq    api.JobRequest
		field string
	}{
		{api.JobRequest{Name: "resnet\u202egnp.exe", Command: []string{"x"}, GPUs: 1}, "name"},
		{api.JobRequest{Name: "a\u2067b", Command: []string{"x"}, GPUs: 1}, "name"},
		{api.JobRequest{Name: "a\u200fb", Command: []string{"x"}, GPUs: 1}, "name"},
		{api.JobRequest{Name: "a\x1b[2Jb", Command: []string{"x"}, GPUs: 1}, "name"},
		{api.JobRequest{Group: "sweep\u202e", Command: []string{"x"}, GPUs: 1}, "group"},
	} {
		_, err := cl.Submit(ctx, &c.rq)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Field != c.field || !strings.HasPrefix(ae.Message, c.field+": ") {
			t.Errorf("submit with %s %q: %v, want a 400 naming %s", c.field, c.rq.Name+c.rq.Group, err, c.field)
		}
	}
	_, err = cl.CreateToken(ctx, api.TokenRequest{Agent: true, Label: "node\u202e7"})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Field != "label" {
		t.Errorf("an agent token labelled with a bidi override: %v, want a 400 naming label", err)
	}
	// the default name, from the command, never holds them either
	j, err = cl.Submit(ctx, &api.JobRequest{Command: []string{"/bin/tr\u202eain"}, GPUs: 1})
	if err != nil || visible.Check(j.Name) != nil {
		t.Errorf("default name of /bin/tr\\u202eain: %v %q", err, j.Name)
	}
}
