package trace

import (
	"bufio"
	"bytes"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/dataset"
	"github.com/gandiva-sched/gandiva/internal/model"
)

const sharedData = "../../../shared/data/"

// checkContract asserts the package contract on a reader's output.
func checkContract(t testing.TB, specs []*cluster.JobSpec) {
	t.Helper()
	seen := map[string]bool{}
	for i, s := range specs {
		if err := s.Validate(); err != nil {
			t.Fatalf("job %d %q: %v", i, s.Name, err)
		}
		if seen[s.Name] {
			t.Fatalf("duplicate name %q", s.Name)
		}
		seen[s.Name] = true
		if !(s.Iters > 0) || !(s.IterTime > 0) {
			t.Fatalf("job %q: iters %v, iter time %v", s.Name, s.Iters, s.IterTime)
		}
		if i > 0 && s.Submit < specs[i-1].Submit {
			t.Fatalf("job %d %q submits at %v, before the previous %v", i, s.Name, s.Submit, specs[i-1].Submit)
		}
	}
	if len(specs) > 0 && specs[0].Submit != 0 {
		t.Fatalf("first job submits at %v, want 0", specs[0].Submit)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// readCase is one inline input and what reading it gives.
type readCase struct {
	name    string
	in      string
	o       Options
	jobs    int    // expected jobs when err is ""
	skipped int    // expected skips
	err     string // expected error substring
}

func runCases(t *testing.T, file string, f Format, cases []readCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			specs, w, err := Read(strings.NewReader(c.in), file, f, c.o)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkContract(t, specs)
			if len(specs) != c.jobs || w.Skipped != c.skipped {
				t.Fatalf("got %d jobs, %d skipped (%v); want %d, %d", len(specs), w.Skipped, w.Reasons, c.jobs, c.skipped)
			}
		})
	}
}

const tiresiasHead = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"

func TestTiresias(t *testing.T) {
	runCases(t, "t.csv", Tiresias, []readCase{
		{name: "ok", in: tiresiasHead + "0,1,5,10,vgg19,100,1\n1,2,7,0,resnet50,50,1\n", jobs: 2},
		{name: "columns in any order, extras", in: "model_name,duration,extra,job_id,submit_time,num_gpu,user\nalexnet,10,x,a,3,4,bob\n", jobs: 1},
		{name: "unknown model kept", in: tiresiasHead + "0,1,0,10,mystery,100,1\n", jobs: 1},
		{name: "zero duration skipped", in: tiresiasHead + "0,1,0,10,vgg19,0,1\n1,1,0,10,vgg19,3,1\n", jobs: 1, skipped: 1},
		{name: "bad gpus", in: tiresiasHead + "0,x,0,10,vgg19,100,1\n", err: `t.csv line 2, field num_gpu: strconv.Atoi: parsing "x": invalid syntax`},
		{name: "zero gpus", in: tiresiasHead + "0,1,0,10,vgg19,100,1\n1,0,0,10,vgg19,100,1\n", err: "t.csv line 3, field num_gpu: must be positive, got 0"},
		{name: "negative duration", in: tiresiasHead + "0,1,0,10,vgg19,-1,1\n", err: "t.csv line 2, field duration: negative value"},
		{name: "NaN submit", in: tiresiasHead + "0,1,NaN,10,vgg19,5,1\n", err: "t.csv line 2, field submit_time: not a finite number"},
		{name: "Inf iterations", in: tiresiasHead + "0,1,0,+Inf,vgg19,5,1\n", err: "line 2, field iterations: not a finite number"},
		{name: "huge duration", in: tiresiasHead + "0,1,0,1e-300,vgg19,1e300,1\n", err: "line 2, field duration: duration 1e+300 s is out of range"},
		{name: "missing column", in: "job_id,submit_time,duration\n0,0,1\n", err: "t.csv line 1, field num_gpu: missing column"},
		{name: "empty", in: "", err: "t.csv line 1: empty trace"},
		{name: "header only", in: tiresiasHead, err: "t.csv: no jobs"},
		{name: "ragged row", in: tiresiasHead + "0,1,0\n", err: "t.csv line 2: wrong number of fields"},
		{name: "duplicate id", in: tiresiasHead + "7,1,0,10,vgg19,100,1\n7,1,0,10,vgg19,100,1\n", err: `t.csv line 3, field job_id: duplicate job id "7" (first on line 2)`},
		{name: "vc on a trace without vcs", in: tiresiasHead + "0,1,0,10,vgg19,100,1\n", o: Options{VC: []string{"a"}}, err: "no virtual clusters"},
	})
}

func TestTiresiasFields(t *testing.T) {
	in := tiresiasHead + "3,2,10,0,ResNet50,120,1\n1,1,4,60,vgg19,30,1\n"
	specs, _, err := Read(strings.NewReader(in), "t.csv", Tiresias, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cat := model.Default()
	a, b := specs[0], specs[1] // sorted by submit: job 1 (t=4) first
	if a.Name != "1" || a.Submit != 0 || a.Iters != 60 || !near(a.Duration(), 30) || a.Model != "vgg19" || a.MemGiB != cat.Get("vgg19").MemGiB || a.User != "default" {
		t.Errorf("job 1: %+v", *a)
	}
	// no iterations: the catalog's V100 time per iteration
	if b.Name != "3" || b.Submit != 6 || b.GPUs != 2 || b.Model != "resnet50" || !near(b.IterTime, cat.Get("resnet50").IterTime["V100"]) || !near(b.Duration(), 120) {
		t.Errorf("job 3: %+v", *b)
	}
}

// The Tiresias simulator's own trace, from the shared data and the embedded copy.
func TestTiresias60(t *testing.T) {
	emb, err := dataset.ReadFile("60_job.csv")
	if err != nil {
		t.Fatal(err)
	}
	inputs := map[string][]byte{"embedded": emb}
	if b, err := os.ReadFile(sharedData + "tiresias/60_job.csv"); err == nil {
		inputs["shared"] = b
	}
	for name, data := range inputs {
		specs, w, err := Read(bytes.NewReader(data), "60_job.csv", Auto, Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkContract(t, specs)
		j := specs[0]
		if len(specs) != 60 || w.Skipped != 0 || j.Name != "0" || j.GPUs != 1 || j.Submit != 0 || !near(j.Duration(), 164) || j.Iters != 606 || j.Model != "vgg19" {
			t.Errorf("%s: %d jobs, first %+v", name, len(specs), *j)
		}
	}
}

const phillyHead = "timestamp,duration,num_gpus,gpu_time,cluster\n"

func TestPhillyCSV(t *testing.T) {
	rows := phillyHead + "2017-10-09 07:01:55,66.0,1,66.0,aa\n2017-10-09 06:13:03,2951.0,2,5902.0,bb\n2017-10-09 06:13:36,10,8,80,aa\n"
	runCases(t, "philly.csv", PhillyCSV, []readCase{
		{name: "ok", in: rows, jobs: 3},
		{name: "vc filter", in: rows, o: Options{VC: []string{"aa"}}, jobs: 2},
		{name: "vc filter no match", in: rows, o: Options{VC: []string{"zz"}}, err: "no jobs (3 usable, 0 skipped, vc filter [zz])"},
		{name: "limit", in: rows, o: Options{Limit: 1}, jobs: 1},
		{name: "zero duration skipped", in: rows + "2017-10-09 06:13:36,0.0,1,0,aa\n", jobs: 3, skipped: 1},
		{name: "bad gpus", in: rows + "2017-10-09 06:13:36,1.0,x,0,aa\n", err: `philly.csv line 5, field num_gpus: strconv.Atoi: parsing "x": invalid syntax`},
		{name: "bad time", in: rows + "2017-13-09 06:13:36,1.0,1,0,aa\n", err: `philly.csv line 5, field timestamp: "2017-13-09 06:13:36": month out of range`},
		{name: "negative duration", in: rows + "2017-10-09 06:13:36,-1,1,0,aa\n", err: "philly.csv line 5, field duration: negative value"},
		{name: "Inf duration", in: rows + "2017-10-09 06:13:36,Inf,1,0,aa\n", err: "line 5, field duration: not a finite number"},
		{name: "empty cluster", in: rows + "2017-10-09 06:13:36,1,1,0,\n", err: "line 5, field cluster: empty virtual cluster"},
		{name: "missing column", in: "timestamp,duration,cluster\n", err: "philly.csv line 1, field num_gpus: missing column"},
		{name: "quoted newline", in: phillyHead + "2017-10-09 06:13:36,1,1,1,aa\n\"2017-10-09\n06:13:36\",1,1,0,aa\n", err: "philly.csv line 3, field timestamp"},
	})
}

func TestPhillyCSVFields(t *testing.T) {
	rows := phillyHead + "2017-10-09 07:01:55,66.0,1,66.0,aa\n2017-10-09 06:13:03,2951.0,2,5902.0,bb\n"
	specs, _, err := Read(strings.NewReader(rows), "philly.csv", Auto, Options{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	a, b := specs[0], specs[1]
	if a.Name != "philly-2" || a.User != "vc-bb" || a.VC != "bb" || a.GPUs != 2 || a.Submit != 0 || !near(a.Duration(), 2951) || a.Model == "" {
		t.Errorf("first: %+v", *a)
	}
	if b.Name != "philly-1" || b.Submit != 2932 || !near(b.Duration(), 66) {
		t.Errorf("second: %+v", *b)
	}
	if m := model.Default().Get(a.Model); m == nil || a.MemGiB != m.MemGiB || !near(a.IterTime, v100(m)) {
		t.Errorf("model %q: mem %v, iter time %v", a.Model, a.MemGiB, a.IterTime)
	}
}

// A job's model depends on the seed and its row only, not on filters.
func TestModelAssignment(t *testing.T) {
	var sb strings.Builder
	sb.WriteString(phillyHead)
	for i := range 200 {
		sb.WriteString("2017-10-09 07:01:55,66,1,66," + []string{"aa", "bb"}[i%2] + "\n")
	}
	models := func(seed uint64, vc ...string) map[string]string {
		specs, _, err := Read(strings.NewReader(sb.String()), "p.csv", PhillyCSV, Options{Seed: seed, VC: vc})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, s := range specs {
			out[s.Name] = s.Model
		}
		return out
	}
	all, again, other, aa := models(1), models(1), models(2), models(1, "aa")
	diff, kinds := 0, map[string]bool{}
	for n, m := range all {
		kinds[m] = true
		if again[n] != m {
			t.Fatalf("seed 1 gave %q then %q for %s", m, again[n], n)
		}
		if other[n] != m {
			diff++
		}
		if x, ok := aa[n]; ok && x != m {
			t.Fatalf("%s: %q unfiltered, %q filtered", n, m, x)
		}
	}
	if diff < 100 || len(kinds) < len(commonModels)-2 {
		t.Errorf("seeds 1 and 2 differ on %d of 200 jobs; %d models used", diff, len(kinds))
	}
}

func TestPhillyCSVReal(t *testing.T) {
	path := sharedData + "philly/philly.csv"
	if _, err := os.Stat(path); err != nil {
		t.Skip("no", path)
	}
	start := time.Now()
	specs, w, err := ReadFile(path, Auto, Options{})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	checkContract(t, specs)
	// philly.csv has no zero-duration rows: nothing is skipped.
	if len(specs) != 82247 || w.Skipped != 0 {
		t.Errorf("%d jobs, %d skipped, want 82247, 0", len(specs), w.Skipped)
	}
	t.Logf("read %d jobs in %v", len(specs), took)
	vc, _, err := ReadFile(path, PhillyCSV, Options{VC: []string{"b436b2"}})
	if err != nil {
		t.Fatal(err)
	}
	checkContract(t, vc)
	if len(vc) != 7423 {
		t.Errorf("vc b436b2: %d jobs, want 7423", len(vc))
	}
	lim, _, err := ReadFile(path, PhillyCSV, Options{Limit: 1000})
	if err != nil || len(lim) != 1000 || lim[0].Name != specs[0].Name || lim[999].Name != specs[999].Name {
		t.Errorf("limit 1000: %d jobs, %v", len(lim), err)
	}
}

func BenchmarkPhillyCSV(b *testing.B) {
	data, err := os.ReadFile(sharedData + "philly/philly.csv")
	if err != nil {
		b.Skip("no philly.csv")
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, _, err := Read(bytes.NewReader(data), "philly.csv", PhillyCSV, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

const phillyJSON = `[
 {"status": "Pass", "vc": "aa", "jobid": "app_1", "user": "u1", "submitted_time": "2017-10-03 10:40:56",
  "attempts": [
   {"start_time": "2017-10-03 10:41:00", "end_time": "2017-10-03 10:42:00", "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}, {"ip": "m2", "gpus": ["gpu3"]}]},
   {"start_time": "2017-10-03 11:00:00", "end_time": null, "detail": []},
   {"start_time": "2017-10-03 12:00:00", "end_time": "2017-10-03 12:00:30", "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}]},
 {"status": "Killed", "vc": "bb", "jobid": "app_2", "user": "", "submitted_time": "2017-10-03 10:40:50",
  "attempts": [{"start_time": "2017-10-03 10:41:00", "end_time": "2017-10-03 10:41:10", "detail": [{"ip": "m3", "gpus": ["gpu0"]}]}]},
 {"status": "Failed", "vc": "aa", "jobid": "app_3", "user": "u2", "submitted_time": "2017-10-03 10:40:57", "attempts": []},
 {"status": "Failed", "vc": "aa", "jobid": "app_4", "user": "u2", "submitted_time": "2017-10-03 10:40:58",
  "attempts": [{"start_time": "2017-10-03 10:41:00", "end_time": null, "detail": [{"ip": "m3", "gpus": ["gpu0"]}]}]}
]
`

func TestPhillyJSONFields(t *testing.T) {
	specs, w, err := Read(strings.NewReader(phillyJSON), "log.json", Auto, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkContract(t, specs)
	if len(specs) != 2 || w.Skipped != 2 || w.Reasons["no attempts"] != 1 || w.Reasons["no complete attempt"] != 1 {
		t.Fatalf("%d jobs, warnings %+v", len(specs), w)
	}
	if w.Status["Pass"] != 1 || w.Status["Killed"] != 1 || len(w.Status) != 2 {
		t.Errorf("status counts %v", w.Status)
	}
	a, b := specs[0], specs[1]
	if a.Name != "app_2" || a.User != "vc-bb" || a.Submit != 0 || a.GPUs != 1 || !near(a.Duration(), 10) {
		t.Errorf("app_2: %+v", *a)
	}
	// GPUs of the first attempt; both complete attempts counted (60 + 30 s).
	if b.Name != "app_1" || b.User != "u1" || b.VC != "aa" || b.Submit != 6 || b.GPUs != 3 || !near(b.Duration(), 90) {
		t.Errorf("app_1: %+v", *b)
	}
}

func TestPhillyJSON(t *testing.T) {
	job := func(id, sub, start, end string) string {
		return `{"status":"Pass","vc":"aa","jobid":` + id + `,"user":"u","submitted_time":` + sub +
			`,"attempts":[{"start_time":` + start + `,"end_time":` + end + `,"detail":[{"ip":"m","gpus":["gpu0"]}]}]}`
	}
	ok := job(`"a"`, `"2017-10-03 10:40:56"`, `"2017-10-03 10:41:00"`, `"2017-10-03 10:42:00"`)
	runCases(t, "log.json", PhillyJSON, []readCase{
		{name: "ok", in: "[" + ok + "]", jobs: 1},
		{name: "json lines", in: ok + "\n" + job(`"b"`, `"2017-10-03 10:40:56"`, `"2017-10-03 10:41:00"`, `"2017-10-03 10:42:00"`) + "\n", jobs: 2},
		{name: "leading space", in: "\n  [" + ok + "]\n", jobs: 1},
		{name: "backwards attempt", in: "[" + ok + "," + job(`"b"`, `"2017-10-03 10:40:56"`, `"2017-10-03 10:43:00"`, `"2017-10-03 10:42:00"`) + "]", jobs: 1, skipped: 1},
		{name: "None end", in: "[" + ok + "," + job(`"b"`, `"2017-10-03 10:40:56"`, `"2017-10-03 10:43:00"`, `"None"`) + "]", jobs: 1, skipped: 1},
		{name: "bad submitted", in: "[" + ok + "," + job(`"b"`, `"yesterday"`, `null`, `null`) + "]", err: `log.json job 1 (byte 211), field submitted_time: "yesterday"`},
		{name: "bad start", in: "[" + job(`"b"`, `"2017-10-03 10:40:56"`, `"x"`, `"2017-10-03 10:40:56"`) + "]", err: `log.json job 0 (byte 1), field attempts[0].start_time`},
		{name: "numeric id", in: "[" + job(`7`, `"2017-10-03 10:40:56"`, `null`, `null`) + "]", err: "log.json job 0 (byte 37), field jobid: json: cannot unmarshal number"},
		{name: "missing id", in: "[" + job(`""`, `"2017-10-03 10:40:56"`, `null`, `null`) + "]", err: "job 0 (byte 1), field jobid: missing job id"},
		{name: "duplicate id", in: "[" + ok + "," + ok + "]", err: `job 1 (byte 211), field jobid: duplicate job id "a" (first at job 0)`},
		{name: "syntax", in: "[" + ok + ",{]", err: "log.json job 1 (byte 211): invalid character ']'"},
		{name: "truncated", in: "[" + ok + ",", err: "log.json job 1 (byte 211): unexpected EOF"},
		{name: "unclosed", in: "[" + ok, err: "log.json byte 211: unexpected EOF"},
		{name: "trailing data", in: "[" + ok + "] x", err: "log.json byte 213: data after the job array"},
		{name: "empty", in: " \n", err: "log.json line 1: empty trace"},
		{name: "empty array", in: "[]", err: "log.json: no jobs"},
		{name: "not an object", in: "[1]", err: "job 0 (byte 2): json: cannot unmarshal number into Go value of type trace.phillyJob"},
	})
}

func TestGavel(t *testing.T) {
	line := func(jobType, steps, scale, arrival string) string {
		return jobType + "\tpython3 main.py\tworkloads/x\t--steps\t1\t" + steps + "\t" + scale + "\t1\t-1.000000\t" + arrival + "\n"
	}
	ok := line("ResNet-18 (batch size 32)", "1000", "1", "0")
	runCases(t, "g.trace", Gavel, []readCase{
		{name: "ok", in: ok + "\n" + line("LM (batch size 20)", "1000", "4", "12.5"), jobs: 2},
		{name: "9 fields", in: "A3C\tcmd\t--max-steps\t0\t500\t1\t1\t-1\t3\n", jobs: 1},
		{name: "11 fields", in: "A3C\tcmd\twd\t--max-steps\t0\t500\t1\tstatic\t1\t-1\t3\n", jobs: 1},
		{name: "7 fields, scale 0 skipped", in: "A3C\tcmd\t--max-steps\t0\t500\t3\t1\nA3C\tcmd\t--max-steps\t0\t500\t3\t0\n", jobs: 1, skipped: 1},
		{name: "unknown job type skipped", in: ok + line("BERT (batch size 8)", "10", "1", "0"), jobs: 1, skipped: 1},
		{name: "zero steps skipped", in: ok + line("A3C", "0", "1", "0"), jobs: 1, skipped: 1},
		{name: "bad steps", in: ok + line("A3C", "many", "1", "0"), err: `g.trace line 2, field total_steps: strconv.ParseFloat: parsing "many": invalid syntax`},
		{name: "scale 0", in: ok + line("A3C", "10", "0", "0"), err: "g.trace line 2, field scale_factor: must be positive, got 0"},
		{name: "negative arrival", in: ok + line("A3C", "10", "1", "-4"), err: "g.trace line 2, field arrival_time: negative value"},
		{name: "NaN arrival", in: line("A3C", "10", "1", "nan"), err: "g.trace line 1, field arrival_time: not a finite number"},
		{name: "empty job type", in: line(" ", "10", "1", "0"), err: "g.trace line 1, field job_type: empty job type"},
		{name: "field count", in: ok + "A3C\tcmd\n", err: "g.trace line 2: want 10 tab-separated fields (or 7, 9, 11), got 2"},
		{name: "empty", in: "", err: "g.trace: no jobs"},
	})
}

func TestGavelSample(t *testing.T) {
	specs, w, err := ReadFile("testdata/sample.trace", Auto, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkContract(t, specs)
	if len(specs) != 6 || w.Skipped != 0 {
		t.Fatalf("%d jobs, %d skipped", len(specs), w.Skipped)
	}
	cat := model.Default()
	want := []struct {
		name, model string
		gpus        int
		submit      float64
		iters       float64
	}{
		{"gavel-0", "resnet50-b64", 1, 0, 20000},
		{"gavel-4", "a3c", 1, 60, 15000},
		{"gavel-1", "transformer-b32", 2, 120.5, 25000},
		{"gavel-2", "lm-b20", 4, 300, 75000},
		{"gavel-3", "cyclegan", 1, 420, 8000},
		{"gavel-5", "recommendation-b2048", 8, 900, 312.5},
	}
	for i, x := range want {
		s := specs[i]
		m := cat.Get(x.model)
		if s.Name != x.name || s.Model != x.model || s.GPUs != x.gpus || s.Submit != x.submit || !near(s.Iters, x.iters) ||
			s.IterTime != m.IterTime["V100"] || s.MemGiB != m.MemGiB || s.User != "default" {
			t.Errorf("job %d: %+v, want %+v", i, *s, x)
		}
	}
}

func TestDetect(t *testing.T) {
	cases := []struct {
		name, in string
		want     Format
	}{
		{"a.csv", tiresiasHead, Tiresias},
		{"whatever", "\ufeff" + phillyHead, PhillyCSV},
		{"log", "  [", PhillyJSON},
		{"log.json", "x", PhillyJSON},
		{"x.trace", "A3C", Gavel},
		{"x.txt", "a\tb\tc\td\te\tf\tg", Gavel},
	}
	for _, c := range cases {
		got, err := detect(newReader(c.in), c.name)
		if err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
	if _, err := detect(newReader("a,b\n"), "x.csv"); err == nil || !strings.Contains(err.Error(), "x.csv: cannot detect") {
		t.Errorf("undetectable: %v", err)
	}
	if _, _, err := Read(strings.NewReader(""), "e.csv", Auto, Options{}); err == nil || !strings.Contains(err.Error(), "e.csv: empty trace") {
		t.Errorf("empty: %v", err)
	}
	if _, _, err := Read(strings.NewReader(tiresiasHead), "e.csv", "bogus", Options{}); err == nil || !strings.Contains(err.Error(), `unknown trace format "bogus"`) {
		t.Errorf("bogus format: %v", err)
	}
	var pe *ParseError
	if _, _, err := Read(strings.NewReader(tiresiasHead+"0,x,0,1,a,1,1\n"), "t.csv", Auto, Options{}); !errors.As(err, &pe) || pe.Line != 2 || pe.Field != "num_gpu" {
		t.Errorf("ParseError: %#v", err)
	}
}

func newReader(s string) *bufio.Reader { return bufio.NewReaderSize(strings.NewReader(s), 64<<10) }

func TestCount(t *testing.T) {
	for in, want := range map[string]int{`null`: 0, `[]`: 0, ` [ ] `: 0, `["gpu0"]`: 1, `["a","b,\"c]"]`: 2, `[["x"],{"a":[1,2]},3]`: 3} {
		var c count
		if err := c.UnmarshalJSON([]byte(in)); err != nil || int(c) != want {
			t.Errorf("%s: %d, %v; want %d", in, c, err, want)
		}
	}
	in := `[{"jobid":"a","submitted_time":"2017-10-03 10:40:56","attempts":[{"start_time":"2017-10-03 10:40:56","end_time":"2017-10-03 10:41:56","detail":[{"gpus":"gpu0"}]}]}]`
	if _, _, err := Read(strings.NewReader(in), "x.json", Auto, Options{}); err == nil || !strings.Contains(err.Error(), `x.json job 0 (byte 1): gpus: want an array, got "gpu0"`) {
		t.Errorf("gpus not an array: %v", err)
	}
}
