package arena

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestParseProc(t *testing.T) {
	// a command name with spaces and parentheses; ppid 7, utime 150, stime 50
	stat := "42 (my (odd) prog) S 7 42 42 0 -1 4194560 100 0 0 0 150 50 0 0 20 0 3 0 100 1000 10 18446744073709551615\n"
	ppid, ticks, err := parseStat([]byte(stat))
	if err != nil || ppid != 7 || ticks != 200 {
		t.Errorf("parseStat = %d, %d, %v; want 7, 200", ppid, ticks, err)
	}
	for _, bad := range []string{"", "42 no name", "42 (x) S 7", "42 (x) S x 1 1 0 -1 0 0 0 0 0 1 1 0 0"} {
		if _, _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q): no error", bad)
		}
	}
	status := "Name:\tetcd\nVmPeak:\t  900 kB\nVmHWM:\t  123456 kB\nVmRSS:\t  100000 kB\n"
	if got := parseStatusHWM([]byte(status)); got != 123456 {
		t.Errorf("parseStatusHWM = %d, want 123456", got)
	}
	if got := parseStatusHWM([]byte("Name: x\n")); got != 0 {
		t.Errorf("parseStatusHWM without VmHWM = %d", got)
	}
	// user nice system idle iowait irq softirq steal guest guest_nice
	total, busy, err := parseProcStat([]byte("cpu  100 10 40 800 50 0 0 0 30 0\ncpu0 1 2 3\n"))
	if err != nil || total != 1000 || busy != 150 {
		t.Errorf("parseProcStat = %d, %d, %v; want 1000, 150", total, busy, err)
	}
	if _, _, err := parseProcStat([]byte("intr 1 2 3\n")); err == nil {
		t.Error("parseProcStat without a cpu line: no error")
	}
	// this process's own files parse (Linux)
	if data, err := os.ReadFile("/proc/self/stat"); err == nil {
		if ppid, _, err := parseStat(data); err != nil || ppid != os.Getppid() {
			t.Errorf("/proc/self/stat: ppid %d, %v; want %d", ppid, err, os.Getppid())
		}
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP gandiva_engine_round_duration_seconds Wall time of rounds.
# TYPE gandiva_engine_round_duration_seconds summary
gandiva_engine_round_duration_seconds_sum 1.5
gandiva_engine_round_duration_seconds_count 30
gandiva_engine_round_max_duration_seconds 0.25
gandiva_gpus{use="free"} 12
garbage
x notanumber
`
	m := parseMetrics(strings.NewReader(text))
	r, ok := roundsFrom(m)
	if !ok || r.Rounds != 30 || r.SumSeconds != 1.5 || r.MaxSeconds != 0.25 {
		t.Errorf("roundsFrom = %+v, %v", r, ok)
	}
	if _, ok := m["gandiva_gpus"]; ok || len(m) != 3 {
		t.Errorf("labelled or bad samples kept: %v", m)
	}
	if _, ok := roundsFrom(parseMetrics(strings.NewReader("gandiva_leader 0\n"))); ok {
		t.Error("roundsFrom without rounds: ok")
	}
}

func FuzzScaleParsers(f *testing.F) {
	f.Add([]byte("1 (a) S 2 3 4 5 6 7 8 9 10 11 12 13 14 15"))
	f.Add([]byte("cpu 1 2 3 4 5 6 7 8 9 10\nVmHWM: 5 kB\nm 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		parseStat(data)
		parseStatusHWM(data)
		if total, busy, err := parseProcStat(data); err == nil && busy > total {
			t.Errorf("busy %d > total %d", busy, total)
		}
		parseMetrics(strings.NewReader(string(data)))
	})
}

// TestSummarizeScale checks the figures on samples computed by hand.
func TestSummarizeScale(t *testing.T) {
	// 21 samples a second apart: "etcd" (pid 10) burns 0.5 core for the
	// first 10 s and 1.5 for the next 10; "arena" (pid 1) 0.1 core; the
	// machine (2 CPUs, 200 ticks a second) is 50% then 100% busy;
	// gandiva's rounds: 2 a second of 10 ms for 10 s, then 1 a second of
	// 100 ms, and the longest 0.3 s.
	var ss []scaleSample
	var etcd, arena, busy uint64
	rounds, sum := 0.0, 0.0
	for i := 0; i <= 20; i++ {
		s := scaleSample{T: float64(i), CPUTotal: uint64(200 * i), CPUBusy: busy, Load1: float64(i),
			Procs:   []procSample{{PID: 1, Name: "arena", Ticks: arena, HWMKiB: 2048}, {PID: 10, Name: "etcd", Ticks: etcd, HWMKiB: uint64(1024 * (100 + i))}},
			Gandiva: &roundSample{Rounds: rounds, SumSeconds: sum, MaxSeconds: 0.3}}
		ss = append(ss, s)
		arena += 10
		if i < 10 {
			etcd += 50
			busy += 100
			rounds, sum = rounds+2, sum+0.02
		} else {
			etcd += 150
			busy += 200
			rounds, sum = rounds+1, sum+0.1
		}
	}
	// 30 bindings: 20 in the first second, 10 over the next 10 s
	var binds []float64
	for i := 0; i < 20; i++ {
		binds = append(binds, float64(i)/20)
	}
	for i := 1; i <= 10; i++ {
		binds = append(binds, 1+float64(i))
	}
	f := summarizeScale(ss, binds, 2)
	check := func(name string, got, want float64) {
		t.Helper()
		if !near(got, want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if f.Samples != 21 || f.CPUs != 2 || f.Binds != 30 {
		t.Errorf("samples %d, cpus %d, binds %d", f.Samples, f.CPUs, f.Binds)
	}
	check("sample_s", f.SampleSeconds, 1)
	check("binds/s", f.BindsPerSec, 30.0/11)
	// the 10 s window from 0 holds the first 20 and 9 more (t 2 to 10)
	check("peak binds/s", f.PeakBindsPerSec, 29.0/10)
	if len(f.Procs) != 2 || f.Procs[0].Name != "etcd" || f.Busiest != "etcd" {
		t.Fatalf("procs %+v, busiest %q", f.Procs, f.Busiest)
	}
	e := f.Procs[0]
	check("etcd cpu", e.CPUSeconds, 20)
	check("etcd mean", e.MeanCores, 1)
	check("etcd peak", e.PeakCores, 1.5)
	check("etcd rss", e.PeakRSSMiB, 120)
	check("arena cpu", f.Procs[1].CPUSeconds, 2)
	check("arena peak", f.Procs[1].PeakCores, 0.1)
	check("machine", f.MachineBusy, 0.75)
	check("own cores", f.OwnCores, 1.1)
	check("machine peak", f.PeakMachineBusy, 1)
	if f.Saturated {
		t.Error("saturated at 75%")
	}
	check("load", f.LoadAvg, 10)
	check("load max", f.LoadAvgMax, 20)
	if f.Rounds != 30 {
		t.Errorf("rounds %d", f.Rounds)
	}
	check("round mean", f.RoundMeanMs, 1200.0/30)
	// 20 rounds at 10 ms, 10 at 100 ms: the median is 10 ms, p95 100 ms
	check("round p50", f.RoundP50Ms, 10)
	check("round p95", f.RoundP95Ms, 100)
	check("round max", f.RoundMaxMs, 300)

	// the record's trace times, at 20×, from a replay that started 2 s
	// after the sampler: bindings at trace 40 and 100 are 4 and 7 s
	t0 := time.Unix(1000, 0)
	rec := &Record{Jobs: []JobSeen{{Completed: 90}, {Completed: -1}}, Holds: []Hold{{From: 100, To: -1}, {From: 40, To: 80}}}
	sf := scaleOf(ss, rec, 20, t0.Add(2*time.Second), t0)
	if sf.JobsDone != 1 || sf.Binds != 2 || !near(sf.BindsPerSec, 2.0/3) {
		t.Errorf("scaleOf: %d jobs done, %d binds at %v/s; want 1, 2 at 0.667/s", sf.JobsDone, sf.Binds, sf.BindsPerSec)
	}

	// no samples, no bindings: zeros, no division by zero
	z := summarizeScale(nil, nil, 2)
	if z.Binds != 0 || z.BindsPerSec != 0 || z.MachineBusy != 0 || len(z.Procs) != 0 || z.Busiest != "" {
		t.Errorf("empty: %+v", z)
	}
}

// TestPeakRateBrute checks peakRate against the plain statement: the
// highest rate between any two samples at least ScaleWindow apart whose
// later one is the first so far from the earlier.
func TestPeakRateBrute(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 300; trial++ {
		n := 2 + r.IntN(40)
		ts := make([]float64, n)
		cum := make([]float64, n)
		for i := 1; i < n; i++ {
			ts[i] = ts[i-1] + 0.2 + 3*r.Float64()
			cum[i] = cum[i-1] + 5*r.Float64()
		}
		amount := func(i, j int) float64 { return cum[j] - cum[i] }
		want := 0.0
		if ts[n-1]-ts[0] < ScaleWindow {
			want = amount(0, n-1) / (ts[n-1] - ts[0])
		} else {
			for i := 0; i < n; i++ {
				for j := i + 1; j < n; j++ {
					if ts[j]-ts[i] >= ScaleWindow {
						want = max(want, amount(i, j)/(ts[j]-ts[i]))
						break
					}
				}
			}
		}
		if got := peakRate(ts, amount); !near(got, want) {
			t.Fatalf("trial %d: peakRate = %v, want %v (ts %v)", trial, got, want, ts)
		}
	}
}

// TestSamplerReadsChildren runs the sampler on this process and a child
// it starts, and checks both are found with their names.
func TestSamplerReadsChildren(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	s := startSampler(t.Context(), "")
	cmd := startSleep(t)
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	deadline := time.Now().Add(time.Minute)
	for {
		s.sample(t.Context())
		s.mu.Lock()
		last := s.samples[len(s.samples)-1]
		s.mu.Unlock()
		names := map[string]bool{}
		for _, p := range last.Procs {
			names[p.Name] = true
		}
		if names["arena"] && names["sleep"] && last.CPUTotal > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sampled %v, want arena and sleep", names)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := s.stop(); len(got) < 2 {
		t.Errorf("%d samples", len(got))
	}
}

// startSleep starts a child process that sleeps for a minute.
func startSleep(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep: %v", err)
	}
	return cmd
}
