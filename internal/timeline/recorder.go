package timeline

import (
	"fmt"
	"math"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
)

// Options configure a Recorder.
type Options struct {
	// Classify maps a job to a kind; nil: DefaultClassify.
	Classify Classify
	// Kinds describe the kinds Classify returns; nil: DefaultKinds. A kind
	// Classify returns that is not listed is added with a grey fill.
	Kinds []KindInfo
	// NoParked leaves suspended jobs off the GPU rows; they stay in their
	// lanes.
	NoParked bool
	// Noted promises that the driver notes, before each Observe, every job
	// whose state may have changed since the previous one: the events it
	// applied (NoteEvent) and the actions the engine applied (NoteApplied).
	// Observe then examines only those jobs (and their pre-run partners):
	// its cost is O(changes). Without it, Observe compares the Seq of
	// every job not yet terminal: O(live jobs) per observation, needing
	// nothing from the driver.
	Noted bool
}

// open marks a segment that has not ended.
var open = math.Inf(1)

// seg is one stored segment: on a GPU row, ref is the job; in a job's
// lane, ref is the number of GPUs the job held (0 while waiting).
type seg struct {
	start, end float64 // end is open (+Inf) while the segment lasts
	ref        int32
	kind       uint8
}

// dead marks a segment removed because it lasted no time.
const dead = math.MaxUint8

type openSeg struct {
	job  cluster.JobID
	kind uint8
	idx  int32 // into gpuRow.segs
}

type gpuRow struct {
	segs []seg
	open []openSeg
	// recent are segments closed at time recentT, which a segment of the
	// same job and kind opening at that time continues instead.
	recent  []openSeg
	recentT float64
}

// jobRec is what the recorder keeps of a job.
type jobRec struct {
	name, user, group string
	gang              int
	probe             bool
	parent            cluster.JobID
	submitted, ended  float64
	state             cluster.JobState
	reason            string
	seq               uint64
	home              cluster.ServerID
	seen              bool
	gpus              []cluster.GPUID // held, as last observed
	park              []cluster.GPUID // where its suspended state is parked
	lane              []seg
	stamp             uint64 // examined in observation stamp
	laneStamp         uint64
}

type serverInfo struct {
	name, gpuType string
	first, n      int
}

const jobChunk = 4096

func (r *Recorder) job(id cluster.JobID) *jobRec { return &r.jobs[id/jobChunk][id%jobChunk] }

// Recorder builds a timeline from engine snapshots. See the package comment.
type Recorder struct {
	opts     Options
	classify Classify
	kinds    []KindInfo
	kindIdx  map[Kind]uint8
	started  bool
	start    float64
	now      float64
	epoch    uint64
	version  uint64
	jobs     [][]jobRec // in chunks of jobChunk, so that growing copies nothing
	njobs    int
	live     []cluster.JobID // jobs not known to be terminal, in ID order
	rows     []gpuRow
	parked   [][]cluster.JobID // per GPU: jobs whose suspended state is parked there
	servers  []serverInfo
	gpuStamp []uint64
	affected []cluster.GPUID
	dirty    []cluster.JobID // lanes to bring up to date
	notes    []cluster.JobID
	want     []openSeg                // syncGPU's scratch
	byName   map[string]cluster.JobID // redact.go
}

// NewRecorder returns an empty recorder.
func NewRecorder(opts Options) *Recorder {
	r := &Recorder{opts: opts, classify: opts.Classify, kindIdx: map[Kind]uint8{}}
	if r.classify == nil {
		r.classify = DefaultClassify
	}
	kinds := opts.Kinds
	if kinds == nil {
		kinds = DefaultKinds()
	}
	for _, k := range kinds {
		r.kindIndex(k.Kind, &k)
	}
	return r
}

// kindIndex returns the index of kind k, adding it (with info, or a grey
// fill) when new.
func (r *Recorder) kindIndex(k Kind, info *KindInfo) uint8 {
	if i, ok := r.kindIdx[k]; ok {
		return i
	}
	if len(r.kinds) >= dead {
		panic("timeline: too many kinds")
	}
	ki := KindInfo{Kind: k, Label: string(k), Color: "#7f8c8d", Style: Fill, Holds: true}
	if info != nil {
		ki = *info
	}
	r.kinds = append(r.kinds, ki)
	r.kindIdx[k] = uint8(len(r.kinds) - 1)
	return uint8(len(r.kinds) - 1)
}

// Kinds returns the kinds in legend order. The slice is the recorder's.
func (r *Recorder) Kinds() []KindInfo { return r.kinds }

// Now is the time of the latest observation.
func (r *Recorder) Now() float64 { return r.now }

// Start is the time of the first observation.
func (r *Recorder) Start() float64 { return r.start }

// Version counts the observations that changed the record; a reader that
// saw version v has nothing new to read while Version() == v.
func (r *Recorder) Version() uint64 { return r.version }

// Note tells a Noted recorder that job id may have changed state.
func (r *Recorder) Note(id cluster.JobID) {
	if id >= 0 {
		r.notes = append(r.notes, id)
	}
}

// NoteApplied notes the jobs of the actions a round applied
// (engine.Result.Applied, or what the executor was given).
func (r *Recorder) NoteApplied(acts []engine.Applied) {
	for i := range acts {
		r.Note(acts[i].Job)
	}
}

// NoteEvent notes the jobs an applied event may have changed: its job, and
// for a lost node every job the recorder shows holding or parked on it.
func (r *Recorder) NoteEvent(ev cluster.Event) {
	switch ev.Kind {
	case cluster.EvNodeDown, cluster.EvNodeUp:
		if ev.Node < 0 || int(ev.Node) >= len(r.servers) {
			return
		}
		sv := r.servers[ev.Node]
		for g := sv.first; g < sv.first+sv.n && g < len(r.rows); g++ {
			for _, o := range r.rows[g].open {
				r.Note(o.job)
			}
			for _, id := range r.parked[g] {
				r.Note(id)
			}
		}
	case cluster.EvTick, cluster.EvSetting:
	default:
		r.Note(ev.Job)
	}
}

// Observe records the state of s as of s.Now. See Options.Noted for what
// it examines. s.Now must not be before the previous observation's.
func (r *Recorder) Observe(s *cluster.Snapshot) error {
	now := s.Now
	if math.IsNaN(now) || math.IsInf(now, 0) {
		return fmt.Errorf("timeline: snapshot time %v is not finite", now)
	}
	if r.started && now < r.now {
		return fmt.Errorf("timeline: snapshot time %.6f is before the previous observation's %.6f", now, r.now)
	}
	if !r.started {
		r.started, r.start = true, now
	}
	r.now = now
	r.epoch++
	r.syncServers(s.Cluster, len(s.GPUs))
	r.affected, r.dirty = r.affected[:0], r.dirty[:0]
	for id := r.njobs; id < len(s.Jobs); id++ {
		r.addJob(s.Jobs[id])
		r.examine(s, cluster.JobID(id))
	}
	if r.opts.Noted {
		for _, id := range r.notes {
			if int(id) >= len(s.Jobs) {
				continue
			}
			r.examine(s, id)
			j := s.Jobs[id]
			if j.PreRun != cluster.NoJob {
				r.examine(s, j.PreRun)
			}
			if j.Probe && j.Parent != cluster.NoJob {
				r.examine(s, j.Parent)
			}
		}
		r.notes = r.notes[:0]
	} else {
		for _, id := range r.live {
			r.examine(s, id)
		}
	}
	if len(r.affected) == 0 && len(r.dirty) == 0 {
		return nil
	}
	r.version++
	for _, g := range r.affected {
		r.syncGPU(s, g)
	}
	for _, id := range r.dirty {
		r.syncLane(s, id)
	}
	if r.opts.Noted {
		return nil
	}
	// drop the jobs that ended from the live list
	out := r.live[:0]
	for _, id := range r.live {
		if !r.job(id).state.Terminal() {
			out = append(out, id)
		}
	}
	r.live = out
	return nil
}

func (r *Recorder) syncServers(c *cluster.Cluster, gpus int) {
	if c != nil {
		for len(r.servers) < len(c.Servers) {
			sv := &c.Servers[len(r.servers)]
			r.servers = append(r.servers, serverInfo{name: sv.Name, gpuType: c.Types[sv.Type].Name, first: int(sv.FirstGPU), n: sv.NumGPUs})
		}
	}
	for len(r.rows) < gpus {
		r.rows = append(r.rows, gpuRow{})
		r.parked = append(r.parked, nil)
		r.gpuStamp = append(r.gpuStamp, 0)
	}
}

func (r *Recorder) addJob(j *cluster.Job) {
	sp := j.Spec
	if r.njobs%jobChunk == 0 {
		r.jobs = append(r.jobs, make([]jobRec, jobChunk))
	}
	r.jobs[r.njobs/jobChunk][r.njobs%jobChunk] = jobRec{name: sp.Name, user: sp.User, group: sp.Group, gang: sp.GPUs, probe: j.Probe,
		parent: j.Parent, submitted: j.Submitted, ended: -1, home: cluster.NoServer}
	r.njobs++
	if !r.opts.Noted {
		r.live = append(r.live, j.ID)
	}
	r.nameIndex(sp.Name, j.ID)
}

// examine brings the recorder's view of job id up to date, marking the GPUs
// and lanes to resynchronise.
func (r *Recorder) examine(s *cluster.Snapshot, id cluster.JobID) {
	rec := r.job(cluster.JobID(id))
	if rec.stamp == r.epoch {
		return
	}
	rec.stamp = r.epoch
	j := s.Jobs[id]
	if rec.seen && j.Seq == rec.seq && j.Home == rec.home && j.State == rec.state {
		return
	}
	rec.seen = true
	var hold, park []cluster.GPUID
	if j.State.Holding() {
		hold = j.GPUs
	}
	if !r.opts.NoParked && j.State == cluster.Suspended && j.Home != cluster.NoServer {
		park = j.Last
	}
	// its kind on the GPUs it holds may have changed even where they did not
	r.affect(hold)
	if !slices.Equal(hold, rec.gpus) {
		r.affect(rec.gpus)
		rec.gpus = append(rec.gpus[:0], hold...)
	}
	if !slices.Equal(park, rec.park) {
		for _, g := range rec.park {
			if i, ok := slices.BinarySearch(r.parked[g], id); ok {
				r.parked[g] = slices.Delete(r.parked[g], i, i+1)
			}
		}
		for _, g := range park {
			if i, ok := slices.BinarySearch(r.parked[g], id); !ok {
				r.parked[g] = slices.Insert(r.parked[g], i, id)
			}
		}
		r.affect(rec.park)
		r.affect(park)
		rec.park = append(rec.park[:0], park...)
	}
	rec.seq, rec.home, rec.state, rec.reason = j.Seq, j.Home, j.State, j.Reason
	if j.State.Terminal() {
		rec.ended = j.Ended
	}
	r.markLane(id)
}

func (r *Recorder) affect(gpus []cluster.GPUID) {
	for _, g := range gpus {
		if r.gpuStamp[g] != r.epoch {
			r.gpuStamp[g] = r.epoch
			r.affected = append(r.affected, g)
		}
	}
}

func (r *Recorder) markLane(id cluster.JobID) {
	if rec := r.job(cluster.JobID(id)); rec.laneStamp != r.epoch {
		rec.laneStamp = r.epoch
		r.dirty = append(r.dirty, id)
	}
}

// syncGPU makes GPU g's open segments match the snapshot: its holders, then
// the jobs parked on it.
func (r *Recorder) syncGPU(s *cluster.Snapshot, g cluster.GPUID) {
	row := &r.rows[g]
	holders := s.GPUs[g].Jobs
	shared := len(holders) > 1
	want := r.want[:0]
	defer func() { r.want = want[:0] }()
	for _, h := range holders {
		if k := r.classify(s.Jobs[h], shared); k != "" {
			want = append(want, openSeg{job: h, kind: r.kindIndex(k, nil)})
		}
		// a neighbour arriving or leaving may change whether h is packed
		r.markLane(h)
	}
	for _, p := range r.parked[g] {
		if k := r.classify(s.Jobs[p], false); k != "" {
			want = append(want, openSeg{job: p, kind: r.kindIndex(k, nil)})
		}
	}
	// close what is no longer wanted
	keep := row.open[:0]
	for _, o := range row.open {
		if slices.ContainsFunc(want, func(w openSeg) bool { return w.job == o.job && w.kind == o.kind }) {
			keep = append(keep, o)
			continue
		}
		r.closeSeg(row, o)
	}
	row.open = keep
	// open what is new
	for _, w := range want {
		if slices.ContainsFunc(row.open, func(o openSeg) bool { return o.job == w.job && o.kind == w.kind }) {
			continue
		}
		row.open = append(row.open, r.openSeg(row, w.job, w.kind))
	}
}

func (r *Recorder) closeSeg(row *gpuRow, o openSeg) {
	sg := &row.segs[o.idx]
	if sg.start == r.now {
		sg.kind = dead // it lasted no time
		return
	}
	sg.end = r.now
	if row.recentT != r.now {
		row.recent, row.recentT = row.recent[:0], r.now
	}
	row.recent = append(row.recent, o)
}

func (r *Recorder) openSeg(row *gpuRow, job cluster.JobID, kind uint8) openSeg {
	if row.recentT == r.now {
		for i, c := range row.recent {
			if c.job == job && c.kind == kind {
				row.segs[c.idx].end = open
				row.recent = slices.Delete(row.recent, i, i+1)
				return c
			}
		}
	}
	row.segs = append(row.segs, seg{start: r.now, end: open, ref: int32(job), kind: kind})
	return openSeg{job: job, kind: kind, idx: int32(len(row.segs) - 1)}
}

// syncLane makes job id's lane match its state.
func (r *Recorder) syncLane(s *cluster.Snapshot, id cluster.JobID) {
	rec := r.job(cluster.JobID(id))
	j := s.Jobs[id]
	shared := false
	width := int32(0)
	if j.State.Holding() {
		width = int32(len(j.GPUs))
		for _, g := range j.GPUs {
			if len(s.GPUs[g].Jobs) > 1 {
				shared = true
				break
			}
		}
	}
	k := r.classify(j, shared)
	kind := uint8(dead)
	if k != "" {
		kind = r.kindIndex(k, nil)
	}
	n := len(rec.lane)
	if n > 0 && rec.lane[n-1].end == open {
		last := &rec.lane[n-1]
		if last.kind == kind && last.ref == width {
			return
		}
		if last.start == r.now {
			rec.lane = rec.lane[:n-1]
			n--
		} else {
			last.end = r.now
		}
	}
	if kind == dead {
		return
	}
	if n > 0 && rec.lane[n-1].end == r.now && rec.lane[n-1].kind == kind && rec.lane[n-1].ref == width {
		rec.lane[n-1].end = open
		return
	}
	rec.lane = append(rec.lane, seg{start: r.now, end: open, ref: width, kind: kind})
}
