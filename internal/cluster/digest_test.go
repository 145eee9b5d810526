package cluster

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/harness/perturb"
)

// digestSnapshot builds a small snapshot in which every list the digest
// reads has an element: two servers, two jobs (one running, with a profile
// sample that names a neighbour), an event with a spec, a rejection.
func digestSnapshot(t *testing.T) *Snapshot {
	t.Helper()
	b := NewBuilder("d", nil)
	b.Add(ServerGroup{Type: "V100", Count: 2, GPUs: 4, HostMemGiB: 64})
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	a := &Job{ID: 0, Spec: &JobSpec{Name: "a", User: "u", GPUs: 1}, State: Running, GPUs: []GPUID{0}, Last: []GPUID{0},
		Home: NoServer, FirstStart: 1, Ended: -1, PreRun: NoJob, Parent: NoJob}
	a.Profile.Add(Sample{At: 2, Done: 3, IterTime: 0.5, Width: 1, Servers: 1, Neighbors: []JobID{1}})
	bj := &Job{ID: 1, Spec: &JobSpec{Name: "b", User: "u", GPUs: 2}, Home: NoServer, FirstStart: -1, Ended: -1, PreRun: NoJob, Parent: NoJob}
	jobs := []*Job{a, bj}
	gpus := make([]GPUState, c.NumGPUs())
	gpus[0] = GPUState{Jobs: []JobID{0}, MemGiB: 2}
	servers := []ServerState{{Free: 0b1110, Up: true}, {Free: 0b1111, Up: true}}
	events := []Event{{Time: 2, Kind: EvSubmit, Job: 1, Spec: bj.Spec, Node: NoServer}}
	s := &Snapshot{}
	s.Fill(2, c, jobs, gpus, servers, events, jobs, nil)
	s.Rejected = []Rejection{{Action: Action{Kind: Start, Job: 1, GPUs: []GPUID{4, 5}, Reason: "p"}, Code: RejectRetry, Reason: "busy"}}
	return s
}

// TestDigestSeesEveryField: a change to any field of any type the snapshot
// reaches changes the digest, and Diff names it. A field added to one of
// these types and not to the digest fails here.
func TestDigestSeesEveryField(t *testing.T) {
	for _, tc := range []struct {
		name  string
		get   func(s *Snapshot) reflect.Value // the struct whose fields are changed
		where func(field string) string       // how Diff's answer must end (nil: anything)
	}{
		{"Snapshot", func(s *Snapshot) reflect.Value { return reflect.ValueOf(s).Elem() }, nil},
		{"Job", func(s *Snapshot) reflect.Value { return reflect.ValueOf(s.Jobs[0]).Elem() },
			func(f string) string { return " field " + f }},
		{"JobSpec", func(s *Snapshot) reflect.Value { return reflect.ValueOf(s.Jobs[1].Spec).Elem() }, nil},
		{"Profile", func(s *Snapshot) reflect.Value { return reflect.ValueOf(&s.Jobs[0].Profile).Elem() },
			func(string) string { return "job 0 (a) field Profile" }},
		{"Sample", func(s *Snapshot) reflect.Value { return reflect.ValueOf(&s.Jobs[0].Profile.Samples[0]).Elem() },
			func(string) string { return "job 0 (a) field Profile" }},
		{"GPUState", func(s *Snapshot) reflect.Value { return reflect.ValueOf(&s.GPUs[0]).Elem() },
			func(string) string { return "the state of GPU 0" }},
		{"ServerState", func(s *Snapshot) reflect.Value { return reflect.ValueOf(&s.Servers[1]).Elem() },
			func(string) string { return "the state of server 1" }},
		{"Event", func(s *Snapshot) reflect.Value { return reflect.ValueOf(&s.Events[0]).Elem() },
			func(string) string { return "the events" }},
		{"Rejection", func(s *Snapshot) reflect.Value { return reflect.ValueOf(&s.Rejected[0]).Elem() },
			func(string) string { return "the rejections" }},
		{"Action", func(s *Snapshot) reflect.Value { return reflect.ValueOf(&s.Rejected[0].Action).Elem() },
			func(string) string { return "the rejections" }},
		{"Cluster", func(s *Snapshot) reflect.Value { return reflect.ValueOf(s.Cluster).Elem() },
			func(string) string { return "the cluster" }},
		{"Server", func(s *Snapshot) reflect.Value { return reflect.ValueOf(&s.Cluster.Servers[1]).Elem() },
			func(string) string { return "the cluster" }},
		{"GPUType", func(s *Snapshot) reflect.Value { return reflect.ValueOf(&s.Cluster.Types[0]).Elem() },
			func(string) string { return "the cluster" }},
		{"FreeIndex", func(s *Snapshot) reflect.Value { return reflect.ValueOf(s.Free).Elem() },
			func(string) string { return "the free index" }},
	} {
		n := tc.get(digestSnapshot(t)).NumField()
		for f := 0; f < n; f++ {
			s := digestSnapshot(t)
			var before, after Digest
			before.Take(s)
			v := tc.get(s)
			field := v.Type().Field(f).Name
			perturb.Value(t, v.Field(f))
			after.Take(s)
			got := before.Diff(&after, s)
			switch {
			case got == "":
				t.Errorf("%s.%s changed and the digest did not", tc.name, field)
			case tc.where != nil && !strings.HasSuffix(got, tc.where(field)):
				t.Errorf("%s.%s changed: Diff says %q, want it to end with %q", tc.name, field, got, tc.where(field))
			}
		}
	}
	// The lists' identity: the same jobs' contents, other records.
	for _, tc := range []struct {
		where string
		swap  func(s *Snapshot)
	}{
		{"the job list", func(s *Snapshot) { j := *s.Jobs[1]; s.Jobs[1] = &j }},
		{"the active list", func(s *Snapshot) { s.active = []*Job{s.Jobs[0], {ID: 1}} }},
	} {
		s := digestSnapshot(t)
		var before, after Digest
		before.Take(s)
		tc.swap(s)
		after.Take(s)
		if got := before.Diff(&after, s); got != tc.where {
			t.Errorf("Diff says %q, want %q", got, tc.where)
		}
	}
	// Reading changes nothing.
	s := digestSnapshot(t)
	var before, after Digest
	before.Take(s)
	_ = s.Jobs[0].Attained(10)
	_ = s.FreeOn(nil, 1)
	_, _ = s.Free.Total(), s.Active()
	after.Take(s)
	if got := before.Diff(&after, s); got != "" {
		t.Errorf("reads changed the digest: %s", got)
	}
}
