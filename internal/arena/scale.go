package arena

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The scale profile (Config.Profile): while a scheduler replays the trace,
// a sampler reads, once a second, every child process of this one (the
// control plane's etcd, kube-apiserver, kube-controllers and kwok, and the
// scheduler) and this process itself (the player) from /proc: CPU time and
// resident memory; the machine's CPU use and load average; and, for
// gandiva, its Prometheus metrics (gandiva_engine_round_* and
// gandiva_pods_bound_total, from --metrics-addr). Summarize turns the
// samples and the record's bindings into ScaleFigures. The sampling is the
// I/O at the edge; summarizeScale is pure.

// ProcFigures are one process's figures over a replay.
type ProcFigures struct {
	// Name is the base name of the process's executable (argv[0]);
	// "arena" is this process (the player and its informers).
	Name string `json:"name"`
	// CPUSeconds is user + system time during the replay (from its first
	// sample to its last).
	CPUSeconds float64 `json:"cpu_s"`
	// MeanCores is CPUSeconds over the wall time between those samples;
	// PeakCores the highest over any window of at least ScaleWindow.
	MeanCores float64 `json:"mean_cores"`
	PeakCores float64 `json:"peak_cores"`
	// PeakRSSMiB is the process's peak resident memory (VmHWM) since it
	// started (the plane's processes started before the replay: their
	// set-up, the nodes' creation, counts too).
	PeakRSSMiB float64 `json:"peak_rss_mib"`
}

// ScaleFigures are a replay's figures at scale.
type ScaleFigures struct {
	// JobsDone is the jobs whose work ended (their pods Succeeded) by
	// the end of the replay, or by its failure.
	JobsDone int `json:"jobs_done"`
	// Samples taken, one every SampleSeconds of wall time.
	Samples       int     `json:"samples"`
	SampleSeconds float64 `json:"sample_s"`
	// Binds is every binding of a pod the player saw (re-bindings after
	// a preemption included); BindsPerSec their number over the wall time
	// from the first to the last; PeakBindsPerSec the most in any window
	// of ScaleWindow, per second.
	Binds           int     `json:"binds"`
	BindsPerSec     float64 `json:"binds_per_s"`
	PeakBindsPerSec float64 `json:"peak_binds_per_s"`
	// Rounds of gandiva's engine (its metrics; 0 for other schedulers),
	// their mean and longest wall time, and the 50th and 95th percentiles
	// over rounds of each sampling interval's mean round time (the
	// metrics give a count, a sum and a maximum, not each round's time:
	// with about a round an interval these are the rounds' own
	// percentiles; with many, those of their interval means).
	Rounds      int     `json:"rounds,omitempty"`
	RoundMeanMs float64 `json:"round_mean_ms,omitempty"`
	RoundP50Ms  float64 `json:"round_p50_ms,omitempty"`
	RoundP95Ms  float64 `json:"round_p95_ms,omitempty"`
	RoundMaxMs  float64 `json:"round_max_ms,omitempty"`
	// Procs by CPU time, most first (ties by name).
	Procs []ProcFigures `json:"procs"`
	// MachineBusy is the fraction of the machine's CPU time (all its
	// CPUs) not idle during the replay, PeakMachineBusy the highest over a
	// window of ScaleWindow; CPUs the machine's CPUs. LoadAvg is the mean
	// of the 1-minute load average sampled, LoadAvgMax its highest.
	MachineBusy float64 `json:"machine_busy"`
	// OwnCores is the CPU time of the sampled processes (the plane, the
	// scheduler and this one) over the replay's wall time, in cores: on a
	// shared machine, MachineBusy×CPUs less OwnCores was other work's.
	OwnCores        float64 `json:"own_cores"`
	PeakMachineBusy float64 `json:"peak_machine_busy"`
	CPUs            int     `json:"cpus"`
	LoadAvg         float64 `json:"load_avg"`
	LoadAvgMax      float64 `json:"load_avg_max"`
	// Busiest is the process with the most CPU time, and Saturated
	// whether the machine's CPUs were at least 90% busy over the replay
	// (then what limited it is the CPU, the busiest process's share first).
	Busiest   string `json:"busiest"`
	Saturated bool   `json:"saturated"`
}

// ScaleWindow is the window of the peak rates, in wall seconds.
const ScaleWindow = 10.0

// clockTicks is the kernel's USER_HZ, the unit of /proc's CPU times: 100
// on every Linux architecture Go supports.
const clockTicks = 100

// maxScaleSamples bounds the samples kept (at one a second, 18 hours).
const maxScaleSamples = 1 << 16

// scaleSample is one sampling instant.
type scaleSample struct {
	T     float64 // wall seconds from the sampler's start
	Procs []procSample
	// the machine's CPU ticks (all CPUs) and of those not idle
	CPUTotal, CPUBusy uint64
	Load1             float64
	Gandiva           *roundSample // nil: not scraped
}

// procSample is one process at a sampling instant.
type procSample struct {
	PID    int
	Name   string
	Ticks  uint64 // utime + stime
	HWMKiB uint64
}

// roundSample is gandiva's round counters at a sampling instant.
type roundSample struct {
	Rounds, SumSeconds, MaxSeconds float64
}

// parseStat reads /proc/PID/stat: the parent's pid and the CPU ticks
// (utime + stime). The command name (field 2) may hold spaces and
// parentheses: the fields are read after its last ')'.
func parseStat(data []byte) (ppid int, ticks uint64, err error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, errors.New("stat: no command name")
	}
	f := strings.Fields(string(data[i+1:]))
	// after the name: state(3) ppid(4) ... utime(14) stime(15)
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("stat: %d fields after the name, want at least 13", len(f))
	}
	p, err := strconv.Atoi(f[1])
	if err != nil {
		return 0, 0, fmt.Errorf("stat: ppid: %w", err)
	}
	u, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("stat: utime: %w", err)
	}
	s, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("stat: stime: %w", err)
	}
	return p, u + s, nil
}

// parseStatusHWM reads VmHWM (peak resident memory, KiB) from
// /proc/PID/status; 0 if absent.
func parseStatusHWM(data []byte) uint64 {
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				v, err := strconv.ParseUint(f[0], 10, 64)
				if err == nil {
					return v
				}
			}
		}
	}
	return 0
}

// parseProcStat reads the machine's CPU line of /proc/stat: all ticks and
// those not idle (idle and iowait are idle).
func parseProcStat(data []byte) (total, busy uint64, err error) {
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, errors.New("/proc/stat: no cpu line")
	}
	var idle uint64
	for i, s := range f[1:] {
		if i >= 8 { // guest and guest_nice are already in user and nice
			break
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: field %d: %w", i+1, err)
		}
		total += v
		if i == 3 || i == 4 {
			idle += v
		}
	}
	return total, total - idle, nil
}

// parseMetrics reads the samples without labels of a Prometheus text
// exposition: name → value. Lines it cannot read are skipped; at most
// maxMetricLines lines are read.
func parseMetrics(r io.Reader) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for n := 0; sc.Scan() && n < maxMetricLines; n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || strings.ContainsAny(f[0], "{}") {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		out[f[0]] = v
	}
	return out
}

const maxMetricLines = 100_000

// roundsFrom is gandiva's round counters in a scrape (false when it has
// none: not leading yet).
func roundsFrom(m map[string]float64) (roundSample, bool) {
	n, ok := m["gandiva_engine_round_duration_seconds_count"]
	if !ok {
		return roundSample{}, false
	}
	return roundSample{Rounds: n, SumSeconds: m["gandiva_engine_round_duration_seconds_sum"],
		MaxSeconds: m["gandiva_engine_round_max_duration_seconds"]}, true
}

// summarizeScale turns the samples, the wall times of the bindings (in
// seconds from the same origin as the samples') and the machine's CPUs
// into figures.
func summarizeScale(samples []scaleSample, binds []float64, cpus int) *ScaleFigures {
	f := &ScaleFigures{Samples: len(samples), CPUs: cpus, Procs: []ProcFigures{}}
	if n := len(samples); n >= 2 {
		f.SampleSeconds = (samples[n-1].T - samples[0].T) / float64(n-1)
	}
	// bindings
	b := slices.Clone(binds)
	slices.Sort(b)
	f.Binds = len(b)
	if len(b) >= 2 && b[len(b)-1] > b[0] {
		f.BindsPerSec = float64(len(b)) / (b[len(b)-1] - b[0])
	}
	for i, j := 0, 0; i < len(b); i++ {
		for b[i]-b[j] > ScaleWindow {
			j++
		}
		f.PeakBindsPerSec = max(f.PeakBindsPerSec, float64(i-j+1)/ScaleWindow)
	}
	// processes: each pid's first and last sample
	type track struct {
		name string
		ts   []float64
		tk   []uint64
		hwm  uint64
	}
	tracks := map[int]*track{}
	var pids []int
	loads := 0.0
	for _, s := range samples {
		loads += s.Load1
		f.LoadAvgMax = max(f.LoadAvgMax, s.Load1)
		for _, p := range s.Procs {
			t := tracks[p.PID]
			if t == nil {
				t = &track{name: p.Name}
				tracks[p.PID] = t
				pids = append(pids, p.PID)
			}
			t.ts = append(t.ts, s.T)
			t.tk = append(t.tk, p.Ticks)
			t.hwm = max(t.hwm, p.HWMKiB)
		}
	}
	if len(samples) > 0 {
		f.LoadAvg = loads / float64(len(samples))
	}
	for _, pid := range pids {
		t := tracks[pid]
		pf := ProcFigures{Name: t.name, PeakRSSMiB: float64(t.hwm) / 1024}
		n := len(t.ts)
		if n >= 2 && t.tk[n-1] >= t.tk[0] {
			pf.CPUSeconds = float64(t.tk[n-1]-t.tk[0]) / clockTicks
			if d := t.ts[n-1] - t.ts[0]; d > 0 {
				pf.MeanCores = pf.CPUSeconds / d
			}
			pf.PeakCores = peakRate(t.ts, func(i, j int) float64 { return float64(t.tk[j]-t.tk[i]) / clockTicks })
		}
		f.Procs = append(f.Procs, pf)
	}
	slices.SortFunc(f.Procs, func(a, b ProcFigures) int {
		switch {
		case a.CPUSeconds > b.CPUSeconds:
			return -1
		case a.CPUSeconds < b.CPUSeconds:
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	if len(f.Procs) > 0 && f.Procs[0].CPUSeconds > 0 {
		f.Busiest = f.Procs[0].Name
	}
	if n := len(samples); n >= 2 && samples[n-1].T > samples[0].T {
		own := 0.0
		for _, p := range f.Procs {
			own += p.CPUSeconds
		}
		f.OwnCores = own / (samples[n-1].T - samples[0].T)
	}
	// the machine
	if n := len(samples); n >= 2 && samples[n-1].CPUTotal > samples[0].CPUTotal {
		f.MachineBusy = float64(samples[n-1].CPUBusy-samples[0].CPUBusy) / float64(samples[n-1].CPUTotal-samples[0].CPUTotal)
		ts := make([]float64, n)
		for i, s := range samples {
			ts[i] = s.T
		}
		f.PeakMachineBusy = peakRate(ts, func(i, j int) float64 {
			if samples[j].CPUTotal <= samples[i].CPUTotal {
				return 0
			}
			return float64(samples[j].CPUBusy-samples[i].CPUBusy) / float64(samples[j].CPUTotal-samples[i].CPUTotal) * (ts[j] - ts[i])
		})
		f.Saturated = f.MachineBusy >= 0.9
	}
	// gandiva's rounds
	type interval struct{ mean, n float64 }
	var ivs []interval
	var last *roundSample
	for _, s := range samples {
		g := s.Gandiva
		if g == nil {
			continue
		}
		if last != nil && g.Rounds > last.Rounds && g.SumSeconds >= last.SumSeconds {
			dn := g.Rounds - last.Rounds
			ivs = append(ivs, interval{(g.SumSeconds - last.SumSeconds) / dn, dn})
		}
		if last != nil && g.Rounds < last.Rounds { // a new term: counters restart
			ivs = append(ivs, interval{g.SumSeconds / max(g.Rounds, 1), g.Rounds})
		}
		last = g
		f.RoundMaxMs = max(f.RoundMaxMs, g.MaxSeconds*1000)
	}
	if last != nil && last.Rounds > 0 {
		f.Rounds = int(last.Rounds)
		f.RoundMeanMs = last.SumSeconds / last.Rounds * 1000
	}
	if len(ivs) > 0 {
		slices.SortFunc(ivs, func(a, b interval) int {
			switch {
			case a.mean < b.mean:
				return -1
			case a.mean > b.mean:
				return 1
			}
			return 0
		})
		total := 0.0
		for _, iv := range ivs {
			total += iv.n
		}
		q := func(p float64) float64 {
			want, acc := p*total, 0.0
			for _, iv := range ivs {
				acc += iv.n
				if acc >= want {
					return iv.mean * 1000
				}
			}
			return ivs[len(ivs)-1].mean * 1000
		}
		f.RoundP50Ms, f.RoundP95Ms = q(0.5), q(0.95)
	}
	return f
}

// peakRate is the highest amount(i, j) / (ts[j] - ts[i]) over pairs of
// samples at least ScaleWindow apart, each i with the nearest such j (or
// over the whole span when it is shorter).
func peakRate(ts []float64, amount func(i, j int) float64) float64 {
	n := len(ts)
	if n < 2 || ts[n-1] <= ts[0] {
		return 0
	}
	if ts[n-1]-ts[0] < ScaleWindow {
		return amount(0, n-1) / (ts[n-1] - ts[0])
	}
	peak := 0.0
	for i, j := 0, 0; i < n; i++ {
		for j < n && ts[j]-ts[i] < ScaleWindow {
			j++
		}
		if j == n {
			break
		}
		peak = max(peak, amount(i, j)/(ts[j]-ts[i]))
	}
	return peak
}

// sampler samples /proc (and gandiva's metrics) until stopped.
type sampler struct {
	t0         time.Time
	every      time.Duration
	metricsURL string
	client     *http.Client
	cancel     context.CancelFunc
	done       chan struct{}

	mu      sync.Mutex
	samples []scaleSample
}

// startSampler samples every second from now; metricsURL is gandiva's
// /metrics ("" for other schedulers).
func startSampler(ctx context.Context, metricsURL string) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{t0: time.Now(), every: time.Second, metricsURL: metricsURL, cancel: cancel, done: make(chan struct{}),
		client: &http.Client{Timeout: 5 * time.Second}}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(s.every)
		defer tick.Stop()
		for {
			s.sample(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// sample takes one sample.
func (s *sampler) sample(ctx context.Context) {
	sm := scaleSample{T: time.Since(s.t0).Seconds()}
	if data, err := os.ReadFile("/proc/stat"); err == nil {
		sm.CPUTotal, sm.CPUBusy, _ = parseProcStat(data)
	}
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(data)); len(f) > 0 {
			sm.Load1, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	self := os.Getpid()
	if p, ok := readProc(self, self); ok {
		p.Name = "arena"
		sm.Procs = append(sm.Procs, p)
	}
	if ents, err := os.ReadDir("/proc"); err == nil {
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == self {
				continue
			}
			if p, ok := readProc(pid, self); ok {
				sm.Procs = append(sm.Procs, p)
			}
		}
	}
	if s.metricsURL != "" {
		if r, ok := s.scrape(ctx); ok {
			sm.Gandiva = &r
		}
	}
	s.mu.Lock()
	if len(s.samples) < maxScaleSamples {
		s.samples = append(s.samples, sm)
	}
	s.mu.Unlock()
}

// readProc reads process pid if its parent is parent (or it is parent).
func readProc(pid, parent int) (procSample, bool) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	data, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return procSample{}, false
	}
	ppid, ticks, err := parseStat(data)
	if err != nil || (pid != parent && ppid != parent) {
		return procSample{}, false
	}
	p := procSample{PID: pid, Ticks: ticks}
	if st, err := os.ReadFile(filepath.Join(dir, "status")); err == nil {
		p.HWMKiB = parseStatusHWM(st)
	}
	if cl, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil {
		arg0, _, _ := bytes.Cut(cl, []byte{0})
		p.Name = filepath.Base(string(arg0))
	}
	if p.Name == "" || p.Name == "." {
		p.Name = "pid-" + strconv.Itoa(pid)
	}
	return p, true
}

// scrape reads gandiva's round counters.
func (s *sampler) scrape(ctx context.Context) (roundSample, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.metricsURL, nil)
	if err != nil {
		return roundSample{}, false
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return roundSample{}, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return roundSample{}, false
	}
	return roundsFrom(parseMetrics(io.LimitReader(resp.Body, 16<<20)))
}

// stop takes a last sample, ends the sampling and returns the samples.
func (s *sampler) stop() []scaleSample {
	s.sample(context.Background())
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.samples)
}

// bindWallTimes is the wall time of each binding in rec, in seconds from
// the sampler's start: the record's trace times are from the replay's
// start (playStart), compressed by speed.
func bindWallTimes(rec *Record, speed float64, playStart, samplerStart time.Time) []float64 {
	off := playStart.Sub(samplerStart).Seconds()
	out := make([]float64, 0, len(rec.Holds))
	for _, h := range rec.Holds {
		out = append(out, off+h.From/speed)
	}
	return out
}

// freeLocalAddr is a free TCP address on the loopback interface (for
// gandiva's --metrics-addr).
func freeLocalAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// WriteScale prints the scale figures of the results that have them as
// two Markdown tables: per scheduler, then per process.
func WriteScale(w io.Writer, res []Result) {
	some := false
	for _, r := range res {
		some = some || r.Scale != nil
	}
	if !some {
		return
	}
	fmt.Fprintf(w, "\n| scheduler | pods bound | binds/s | peak binds/s (%gs) | rounds | round mean / p50 / p95 / max ms | machine CPU busy (peak) | plane + scheduler + player, cores | load avg (max) | busiest process |\n|---|---|---|---|---|---|---|---|---|---|\n", ScaleWindow)
	for _, r := range res {
		f := r.Scale
		if f == nil {
			continue
		}
		rounds := "n/a | n/a"
		if f.Rounds > 0 {
			rounds = fmt.Sprintf("%d | %.1f / %.1f / %.1f / %.1f", f.Rounds, f.RoundMeanMs, f.RoundP50Ms, f.RoundP95Ms, f.RoundMaxMs)
		}
		fmt.Fprintf(w, "| %s | %d | %.1f | %.1f | %s | %.0f%% (%.0f%%) of %d CPUs | %.2f | %.1f (%.1f) | %s |\n",
			r.Scheduler, f.Binds, f.BindsPerSec, f.PeakBindsPerSec, rounds, 100*f.MachineBusy, 100*f.PeakMachineBusy, f.CPUs,
			f.OwnCores, f.LoadAvg, f.LoadAvgMax, f.Busiest)
	}
	fmt.Fprintf(w, "\n| scheduler | process | CPU s | mean cores | peak cores (%gs) | peak RSS MiB |\n|---|---|---|---|---|---|\n", ScaleWindow)
	for _, r := range res {
		if r.Scale == nil {
			continue
		}
		for _, p := range r.Scale.Procs {
			fmt.Fprintf(w, "| %s | %s | %.1f | %.2f | %.2f | %.0f |\n", r.Scheduler, p.Name, p.CPUSeconds, p.MeanCores, p.PeakCores, p.PeakRSSMiB)
		}
	}
}

// profiled is the configuration to start s with: c itself, or with
// Profile a copy whose gandiva command serves its metrics on a free
// loopback address, and that address's /metrics URL (for gandiva only).
func (c *Config) profiled(s Scheduler) (*Config, string, error) {
	if !c.Profile || s.Kind != "gandiva" {
		return c, "", nil
	}
	addr, err := freeLocalAddr()
	if err != nil {
		return nil, "", fmt.Errorf("a port for gandiva's metrics: %w", err)
	}
	cc := *c
	cc.Gandiva = append(slices.Clone(c.Gandiva), "--metrics-addr="+addr)
	return &cc, "http://" + addr + "/metrics", nil
}

// scaleOf is the figures of a replay: the samples, and from its record
// (trace times from playStart, compressed by speed) the bindings and the
// jobs done.
func scaleOf(samples []scaleSample, rec *Record, speed float64, playStart, samplerStart time.Time) *ScaleFigures {
	f := summarizeScale(samples, bindWallTimes(rec, speed, playStart, samplerStart), runtime.NumCPU())
	for _, j := range rec.Jobs {
		if j.Completed >= 0 {
			f.JobsDone++
		}
	}
	return f
}
