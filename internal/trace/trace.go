package trace

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/model"
)

// Format names a trace format.
type Format string

// The trace formats Read understands.
const (
	Auto       Format = "auto"        // detect from the name and the first bytes
	Tiresias   Format = "tiresias"    // Tiresias simulator CSV (job_id,num_gpu,submit_time,...)
	PhillyCSV  Format = "philly-csv"  // pre-processed Philly CSV (timestamp,duration,num_gpus,...)
	PhillyJSON Format = "philly-json" // raw Philly cluster_job_log JSON
	Gavel      Format = "gavel"       // Gavel's tab-separated .trace
)

// Formats lists the formats, Auto first.
func Formats() []Format { return []Format{Auto, Tiresias, PhillyCSV, PhillyJSON, Gavel} }

// ParseFormat checks a format name; "" means Auto.
func ParseFormat(s string) (Format, error) {
	if s == "" {
		return Auto, nil
	}
	if f := Format(s); slices.Contains(Formats(), f) {
		return f, nil
	}
	return "", fmt.Errorf("unknown trace format %q (want one of %v)", s, Formats())
}

// Options select and complete the jobs of a trace.
type Options struct {
	// VC keeps only jobs of these virtual clusters (Philly formats and a
	// Tiresias "vc" column); empty keeps all. Asking for it on a trace
	// without virtual clusters is an error.
	VC []string
	// Limit keeps the first Limit jobs in submission order after filtering
	// (0 keeps all).
	Limit int
	// Catalog resolves model names; nil means model.Default().
	Catalog *model.Catalog
	// Seed drives the model assignment of traces without a model column:
	// a job's model is a function of (Seed, its position in the input) only.
	Seed uint64
}

// Warnings counts the jobs a reader skipped because they were unusable
// (not malformed), by reason.
type Warnings struct {
	Skipped int
	Reasons map[string]int
	// Status counts the returned jobs by their final status in the trace
	// (Philly JSON: Pass, Killed, Failed); nil for other formats.
	Status map[string]int
}

func (w *Warnings) skip(reason string) {
	w.Skipped++
	if w.Reasons == nil {
		w.Reasons = map[string]int{}
	}
	w.Reasons[reason]++
}

// ParseError reports malformed input: which file, where and which field.
// Line is 1-based and set for line-oriented formats; JSON errors set Job
// (the 0-based index in the array, -1 outside any job) and Offset instead:
// the byte of a type error, else where the job begins (at the separator
// before it).
type ParseError struct {
	File   string
	Line   int
	Job    int
	Offset int64
	Field  string
	Err    error
}

func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, " line %d", e.Line)
	} else if e.Job >= 0 {
		fmt.Fprintf(&b, " job %d (byte %d)", e.Job, e.Offset)
	} else if e.Offset >= 0 {
		fmt.Fprintf(&b, " byte %d", e.Offset)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ", field %s", e.Field)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

func (e *ParseError) Unwrap() error { return e.Err }

// lineErr is a ParseError at a line.
func lineErr(file string, line int, field string, err error) error {
	return &ParseError{File: file, Line: line, Job: -1, Offset: -1, Field: field, Err: err}
}

// ReadFile opens path and reads it with Read, naming the file in errors.
func ReadFile(path string, f Format, o Options) ([]*cluster.JobSpec, *Warnings, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer fh.Close()
	return Read(fh, path, f, o)
}

// Read parses a trace of format f (Auto detects it from name's extension
// and the first line) and returns its jobs sorted by (Submit, input order),
// with Submit relative to the earliest kept submission. name is used in
// errors and for detection only. Errors are *ParseError for malformed input.
func Read(r io.Reader, name string, f Format, o Options) ([]*cluster.JobSpec, *Warnings, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	if f == Auto || f == "" {
		var err error
		if f, err = detect(br, name); err != nil {
			return nil, nil, err
		}
	}
	b := newBuilder(name, o)
	var err error
	switch f {
	case Tiresias:
		err = readTiresias(br, b)
	case PhillyCSV:
		err = readPhillyCSV(br, b)
	case PhillyJSON:
		err = readPhillyJSON(br, b)
	case Gavel:
		err = readGavel(br, b)
	default:
		_, err = ParseFormat(string(f))
	}
	if err != nil {
		return nil, nil, err
	}
	return b.finish()
}

// detect picks a format from name's extension and the first line.
func detect(br *bufio.Reader, name string) (Format, error) {
	head, err := br.Peek(64 << 10)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	trimmed := bytes.TrimLeft(head, " \t\r\n\ufeff")
	ext := strings.ToLower(filepath.Ext(name))
	switch {
	case len(trimmed) == 0:
		return "", fmt.Errorf("%s: empty trace", name)
	case ext == ".json" || trimmed[0] == '[' || trimmed[0] == '{':
		return PhillyJSON, nil
	}
	line, _, _ := bytes.Cut(trimmed, []byte("\n"))
	if ext == ".trace" || bytes.Count(line, []byte("\t")) >= 6 {
		return Gavel, nil
	}
	cols := map[string]bool{}
	for _, c := range strings.Split(string(line), ",") {
		cols[normCol(c)] = true
	}
	switch {
	case cols["job_id"] && cols["num_gpu"]:
		return Tiresias, nil
	case cols["timestamp"] && cols["num_gpus"]:
		return PhillyCSV, nil
	}
	return "", fmt.Errorf("%s: cannot detect the trace format from its first line %.80q; name one of %v", name, line, Formats()[1:])
}

func normCol(s string) string {
	return strings.ToLower(strings.TrimSpace(strings.TrimPrefix(s, "\ufeff")))
}

// commonModels are the catalog models assigned to jobs of traces without
// a model column (Philly) and to synthetic jobs: image classification,
// language modelling, translation, recommendation and generative models, in
// a fixed order.
var commonModels = []string{
	"resnet50", "resnext50", "vgg16", "inception3", "resnet18-b64",
	"lstm", "gru", "lm-b20", "transformer-b64", "recommendation-b2048",
	"superresolution", "dcgan", "cyclegan", "vae",
}

// defaultIterTime is the V100 iteration time of a model without V100 data.
const defaultIterTime = 0.1

// choice is a model the readers assign, with its derived figures.
type choice struct {
	name     string
	iterTime float64
	mem      float64
}

func choices(cat *model.Catalog, names []string) []choice {
	var out []choice
	for _, n := range names {
		if m := cat.Get(n); m != nil {
			out = append(out, choice{m.Name, v100(m), m.MemGiB})
		}
	}
	if len(out) == 0 {
		out = []choice{{"", defaultIterTime, 0}}
	}
	return out
}

// v100 is the model's iteration time on the reference GPU, or defaultIterTime.
func v100(m *model.Model) float64 {
	if t := m.IterTime[cluster.ReferenceGPU]; t > 0 && !math.IsInf(t, 0) {
		return t
	}
	return defaultIterTime
}

// builder collects a reader's jobs and applies the common contract.
type builder struct {
	name   string
	o      Options
	cat    *model.Catalog
	vcs    map[string]bool
	models []choice
	seen   map[string]string // name -> where it first appeared
	specs  []*cluster.JobSpec
	status []string
	slab   []cluster.JobSpec // where newSpec allocates
	hasVC  bool
	read   int // jobs added, before the VC filter
	w      Warnings
}

func newBuilder(name string, o Options) *builder {
	b := &builder{name: name, o: o, cat: o.Catalog, seen: map[string]string{}}
	if b.cat == nil {
		b.cat = model.Default()
	}
	if len(o.VC) > 0 {
		b.vcs = map[string]bool{}
		for _, v := range o.VC {
			b.vcs[v] = true
		}
	}
	b.models = choices(b.cat, commonModels)
	return b
}

// assign picks the model of the job at position pos, from (Seed, pos) only.
func (b *builder) assign(pos int) choice {
	var p rand.PCG
	p.Seed(b.o.Seed, uint64(pos))
	i, _ := bits.Mul64(p.Uint64(), uint64(len(b.models)))
	return b.models[i]
}

// dup records name at where and returns where it appeared before, if it did.
func (b *builder) dup(name, where string) (string, bool) {
	if prev, ok := b.seen[name]; ok {
		return prev, true
	}
	b.seen[name] = where
	return "", false
}

// newSpec returns a zero spec, allocated in chunks: traces have many.
func (b *builder) newSpec() *cluster.JobSpec {
	if len(b.slab) == cap(b.slab) {
		b.slab = make([]cluster.JobSpec, 0, min(4096, 64+2*len(b.specs)))
	}
	b.slab = b.slab[:len(b.slab)+1]
	return &b.slab[len(b.slab)-1]
}

// add keeps s (with its trace status) unless the VC filter drops it.
func (b *builder) add(s *cluster.JobSpec, status string) {
	b.read++
	if s.VC != "" {
		b.hasVC = true
	}
	if b.vcs != nil && !b.vcs[s.VC] {
		return
	}
	if status != "" && b.status == nil {
		b.status = make([]string, len(b.specs), cap(b.specs))
	}
	b.specs = append(b.specs, s)
	if b.status != nil {
		b.status = append(b.status, status)
	}
}

// finish sorts, limits and re-bases the jobs and checks the contract.
func (b *builder) finish() ([]*cluster.JobSpec, *Warnings, error) {
	if b.vcs != nil && !b.hasVC {
		return nil, nil, fmt.Errorf("%s: the trace has no virtual clusters to filter by (vc %v)", b.name, b.o.VC)
	}
	type key struct {
		t float64
		i int
	}
	keys := make([]key, len(b.specs))
	for i, s := range b.specs {
		keys[i] = key{s.Submit, i}
	}
	slices.SortFunc(keys, func(x, y key) int {
		if x.t != y.t {
			return cmp.Compare(x.t, y.t)
		}
		return x.i - y.i
	})
	if b.o.Limit > 0 && len(keys) > b.o.Limit {
		keys = keys[:b.o.Limit]
	}
	if len(keys) == 0 {
		return nil, nil, fmt.Errorf("%s: no jobs (%d usable, %d skipped, vc filter %v)", b.name, b.read, b.w.Skipped, b.o.VC)
	}
	out := make([]*cluster.JobSpec, len(keys))
	t0 := keys[0].t
	for k, x := range keys {
		s := b.specs[x.i]
		s.Submit -= t0
		if s.Skew == 0 && s.Model != "" {
			if m := b.cat.Get(s.Model); m != nil {
				s.Skew = m.Skew // the model profile's tensor skew
			}
		}
		if err := s.Validate(); err != nil { // a reader bug, not bad input
			return nil, nil, fmt.Errorf("%s: job %q: %w", b.name, s.Name, err)
		}
		out[k] = s
		if b.status != nil {
			st := b.status[x.i]
			if b.w.Status == nil {
				b.w.Status = map[string]int{}
			}
			b.w.Status[st]++
		}
	}
	return out, &b.w, nil
}

// work completes a job's (Iters, IterTime) from its duration and either a
// known iteration count (iters > 0) or an iteration time, so that
// Iters × IterTime = dur to float precision; it fails when the figures
// leave float range.
func work(dur, iters, iterTime float64) (float64, float64, error) {
	if iters > 0 {
		iterTime = dur / iters
	} else {
		iters = dur / iterTime
	}
	if !(iters > 0) || !(iterTime > 0) || math.IsInf(iters, 0) || math.IsInf(iterTime, 0) {
		return 0, 0, fmt.Errorf("duration %v s is out of range (%v iterations of %v s)", dur, iters, iterTime)
	}
	return iters, iterTime, nil
}

// number parses a finite, non-negative float.
func number(s string) (float64, error) {
	v, err := parseFloat(s)
	if err != nil {
		return 0, err
	}
	if v < 0 {
		return 0, fmt.Errorf("negative value %q", s)
	}
	return v, nil
}

func parseFloat(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, err
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("not a finite number: %q", s)
	}
	return v, nil
}

// gpuCount parses a gang size: a positive integer.
func gpuCount(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, err
	}
	if n <= 0 {
		return 0, fmt.Errorf("must be positive, got %d", n)
	}
	return n, nil
}

// stampLayout is the Philly time format (UTC).
const stampLayout = "2006-01-02 15:04:05"

// stamp parses a Philly time into Unix seconds. Well-formed times take a
// fast path; anything else gets time.Parse's verdict and message.
func stamp(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if len(s) == len(stampLayout) && s[4] == '-' && s[7] == '-' && s[10] == ' ' && s[13] == ':' && s[16] == ':' {
		y, ok1 := digits(s[0:4])
		mo, ok2 := digits(s[5:7])
		d, ok3 := digits(s[8:10])
		h, ok4 := digits(s[11:13])
		mi, ok5 := digits(s[14:16])
		sec, ok6 := digits(s[17:19])
		if ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && mo >= 1 && mo <= 12 && d >= 1 && h < 24 && mi < 60 && sec < 60 {
			if t := time.Date(y, time.Month(mo), d, h, mi, sec, 0, time.UTC); t.Day() == d {
				return float64(t.Unix()), nil
			}
		}
	}
	t, err := time.Parse(stampLayout, s)
	if err != nil {
		return 0, errors.New(strings.TrimPrefix(err.Error(), "parsing time "))
	}
	return float64(t.Unix()), nil
}

// digits parses a short run of ASCII digits.
func digits(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i] - '0'
		if c > 9 {
			return 0, false
		}
		n = n*10 + int(c)
	}
	return n, true
}
