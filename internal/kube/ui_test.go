package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
	"github.com/gandiva-sched/gandiva/internal/timeline"
	"github.com/gandiva-sched/gandiva/internal/ui"
)

// canListPods lets user list pods in namespace ns (a Role and its binding).
func canListPods(t testing.TB, cs kubernetes.Interface, ns, user string) {
	t.Helper()
	ctx := context.Background()
	name := "list-pods-" + strings.NewReplacer(":", "-").Replace(user)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// get calls the dashboard with a token ("" none) and decodes a 200's JSON
// into out; it returns the status and body.
func get(t testing.TB, base, path, token string, out any) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, body)
		}
	}
	return resp.StatusCode, string(body)
}

// The dashboard of gandiva kube, run with exactly deploy/base/rbac.yaml's
// rights: tokens are checked with TokenReview and SubjectAccessReview; an
// admin (may list pods everywhere) sees every namespace's jobs, a
// namespace's user only theirs (the others as taken GPUs and counts), a
// ServiceAccount its own namespace, a user of several namespaces is told
// to pick one; the timeline has the runs of the jobs that ran.
func TestDashboardTokens(t *testing.T) {
	t.Parallel() // each has a control plane of its own; they mostly wait
	sa := "system:serviceaccount:gandiva-system:gandiva"
	viewer := "system:serviceaccount:team-b:viewer"
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true, Users: []cplane.User{
		{Name: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:gandiva-system"}},
		{Name: viewer, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:team-b"}},
		{Name: "alice"}, {Name: "bob"}, {Name: "carol"},
	}})
	cs := kubetest.Client(t, p)
	for _, f := range []string{"namespace.yaml", "rbac.yaml"} {
		apply(t, cs, objects(t, "../../deploy/base/"+f), false)
	}
	for _, ns := range []string{"team-a", "team-b"} {
		kubetest.Namespace(t, cs, ns)
	}
	canListPods(t, cs, "team-a", "alice")
	canListPods(t, cs, "team-a", "bob")
	canListPods(t, cs, "team-b", "bob")
	canListPods(t, cs, "team-b", viewer)
	canListPods(t, cs, "team-a", viewer) // a ServiceAccount still sees its own namespace only
	kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 1, GPUs: 4})

	saCfg := p.UserConfig(sa)
	saCS, err := kubernetes.NewForConfig(saCfg)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDashboard()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, ln, saCS, slog.New(slog.NewTextHandler(testWriter{t}, nil))) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	base := "http://" + ln.Addr().String()
	tok := func(user string) string { return p.UserConfig(user).BearerToken }
	admin := p.Config().BearerToken

	// before gandiva leads: the page, but no data
	if st, body := get(t, base, "/ui/api/summary", admin, nil); st != http.StatusServiceUnavailable || !strings.Contains(body, "does not lead") {
		t.Fatalf("summary before leading: %d %s", st, body)
	}
	g := runGandivaConfig(t, saCfg, Options{Policy: "fifo", Dashboard: d})

	createJob(t, cs, jobSpec{ns: "team-a", name: "a1", pods: 1, gpus: 2})
	createJob(t, cs, jobSpec{ns: "team-b", name: "b1", pods: 1, gpus: 2})
	kubetest.Eventually(t, 60*time.Second, "a1 and b1 running", func() (bool, error) {
		return boundCount(t, cs, "team-a", "a1") == 1 && boundCount(t, cs, "team-b", "b1") == 1, nil
	})
	createJob(t, cs, jobSpec{ns: "team-a", name: "a2", pods: 1, gpus: 4})
	time.Sleep(time.Second) // let a1 run a while: its run on the timeline lasts
	finishPods(t, cs, "team-a", "a1")
	kubetest.Eventually(t, 60*time.Second, "a1 done", jobDone(cs, "team-a", "a1"))

	// the timeline as the admin sees it: every job; a1's run is closed
	var all timeline.Data
	kubetest.Eventually(t, 30*time.Second, "a1 finished on the dashboard", func() (bool, error) {
		if st, body := get(t, base, "/ui/api/timeline", admin, &all); st != http.StatusOK {
			return false, fmt.Errorf("timeline: %d %s", st, body)
		}
		for _, j := range all.Jobs {
			if j.Name == "team-a/a1" {
				return j.State == "finished", nil
			}
		}
		return false, nil
	})
	ids := map[string]int{}
	for _, j := range all.Jobs {
		ids[j.Name] = int(j.ID)
	}
	for _, name := range []string{"team-a/a1", "team-b/b1", "team-a/a2"} {
		if _, ok := ids[name]; !ok {
			t.Fatalf("the admin's timeline lacks %s: %+v", name, all.Jobs)
		}
	}
	runs := func(d *timeline.Data, id int) (closed, open int) {
		for _, row := range d.GPUs {
			for _, s := range row {
				if int(s.Job) == id && s.End > s.Start {
					if s.Open {
						open++
					} else {
						closed++
					}
				}
			}
		}
		return
	}
	if c, o := runs(&all, ids["team-a/a1"]); c != 2 || o != 0 {
		t.Fatalf("a1 ran on 2 GPUs and ended: %d closed and %d open segments", c, o)
	}
	if _, o := runs(&all, ids["team-b/b1"]); o != 2 {
		t.Fatalf("b1 runs on 2 GPUs: %d open segments", o)
	}

	// alice (team-a): her jobs by name, team-b's as taken GPUs only
	var mine timeline.Data
	if st, body := get(t, base, "/ui/api/timeline", tok("alice"), &mine); st != http.StatusOK {
		t.Fatalf("alice's timeline: %d %s", st, body)
	}
	for _, j := range mine.Jobs {
		if j.User != "team-a" {
			t.Fatalf("alice sees %s of %s", j.Name, j.User)
		}
	}
	if len(mine.Jobs) != 2 || mine.Hidden != 1 {
		t.Fatalf("alice sees %d jobs (%d hidden), want a1 and a2 (1 hidden)", len(mine.Jobs), mine.Hidden)
	}
	if c, _ := runs(&mine, ids["team-a/a1"]); c != 2 {
		t.Fatalf("alice's timeline: a1's run has %d segments", c)
	}
	if _, o := runs(&mine, -1); o != 2 {
		t.Fatalf("alice's timeline: b1's GPUs are %d anonymous open segments, want 2", o)
	}
	var sum ui.Summary
	if st, body := get(t, base, "/ui/api/summary", tok("alice"), &sum); st != http.StatusOK {
		t.Fatalf("alice's summary: %d %s", st, body)
	}
	if sum.Viewer.User != "team-a" || sum.Viewer.Admin || sum.GPUs != 4 || sum.FreeGPUs != 2 || sum.Nodes["up"] != 1 {
		t.Fatalf("alice's summary: %+v", sum)
	}
	var q ui.Queue
	if st, body := get(t, base, "/ui/api/queue", tok("alice"), &q); st != http.StatusOK || len(q.Jobs) != 1 || q.Jobs[0].Name != "a2" || q.Jobs[0].Reason == "" {
		t.Fatalf("alice's queue: %d %s", st, body)
	} else {
		t.Logf("a2 waits: %s", q.Jobs[0].Reason)
	}
	var nodes struct {
		Nodes []struct {
			Name      string
			Jobs      []string
			OtherJobs int `json:"other_jobs"`
			FreeGPUs  int `json:"free_gpus"`
		}
	}
	if st, body := get(t, base, "/ui/api/nodes", tok("alice"), &nodes); st != http.StatusOK || len(nodes.Nodes) != 1 ||
		len(nodes.Nodes[0].Jobs) != 0 || nodes.Nodes[0].OtherJobs != 1 || nodes.Nodes[0].FreeGPUs != 2 {
		t.Fatalf("alice's nodes: %d %s", st, body)
	}
	if st, body := get(t, base, "/ui/api/nodes", admin, &nodes); st != http.StatusOK || len(nodes.Nodes) != 1 ||
		len(nodes.Nodes[0].Jobs) != 1 || nodes.Nodes[0].Jobs[0] != "team-b/b1" {
		t.Fatalf("the admin's nodes: %d %s", st, body)
	}

	// a ServiceAccount of team-b: team-b only, though it may list team-a's pods too
	var theirs timeline.Data
	if st, body := get(t, base, "/ui/api/timeline", tok(viewer), &theirs); st != http.StatusOK || len(theirs.Jobs) != 1 || theirs.Jobs[0].Name != "team-b/b1" {
		t.Fatalf("team-b's viewer's timeline: %d %s", st, body)
	}
	if st, body := get(t, base, "/ui/api/queue", tok(viewer), &q); st != http.StatusOK || len(q.Jobs) != 0 || q.Hidden != 1 {
		t.Fatalf("team-b's viewer's queue: %d %s", st, body)
	}
	// the admin
	if st, body := get(t, base, "/ui/api/summary", admin, &sum); st != http.StatusOK || !sum.Viewer.Admin || sum.Jobs["running"] != 1 || sum.Jobs["finished"] != 1 {
		t.Fatalf("the admin's summary: %d %s", st, body)
	}
	// bob may list pods in both namespaces: told to use one namespace's token
	if st, body := get(t, base, "/ui/api/summary", tok("bob"), nil); st != http.StatusForbidden || !strings.Contains(body, "team-a, team-b") {
		t.Fatalf("bob's summary: %d %s", st, body)
	}
	// carol may list pods nowhere: no job by name
	if st, body := get(t, base, "/ui/api/timeline", tok("carol"), &theirs); st != http.StatusOK || len(theirs.Jobs) != 0 || theirs.Hidden != 3 {
		t.Fatalf("carol's timeline: %d %s", st, body)
	}
	// no token, a bad one, other paths
	if st, _ := get(t, base, "/ui/api/summary", "", nil); st != http.StatusUnauthorized {
		t.Fatalf("no token: %d", st)
	}
	if st, _ := get(t, base, "/ui/api/summary", "not-a-token", nil); st != http.StatusUnauthorized {
		t.Fatalf("a bad token: %d", st)
	}
	if st, body := get(t, base, "/ui/", "", nil); st != http.StatusOK || !strings.Contains(body, "<html") {
		t.Fatalf("the page: %d", st)
	}
	if st, body := get(t, base, "/healthz", "", nil); st != http.StatusOK || body != "leading\n" {
		t.Fatalf("healthz: %d %q", st, body)
	}
	if st, _ := get(t, base, "/v1/jobs", admin, nil); st != http.StatusNotFound {
		t.Fatalf("/v1/jobs: %d, want 404", st)
	}
	if s := g.stats(); s.Errors != 0 {
		t.Fatalf("%d API calls failed (missing rights?)", s.Errors)
	}
}
