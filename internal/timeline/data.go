package timeline

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// Query selects what Data exports.
type Query struct {
	// From and To bound the time window; segments overlapping it are
	// exported whole (not clipped). To == 0 means up to Now.
	From, To float64
	// Visible reports whether the viewer may see the jobs of user; nil:
	// every job. A hidden job's segments on GPU rows keep their kind and
	// times but not the job (Segment.Job is -1: "another user's job"), and
	// its lane and record are left out.
	Visible func(user string) bool
	// NoLanes leaves the job lanes out (JobInfo.Lane stays empty).
	NoLanes bool
}

// Data is a timeline as the dashboard and the report draw it: a JSON
// document (see the field tags).
type Data struct {
	// From and To are the window asked for; Start is the first
	// observation and Now the latest.
	From    float64 `json:"from"`
	To      float64 `json:"to"`
	Start   float64 `json:"start"`
	Now     float64 `json:"now"`
	Version uint64  `json:"version"`
	// Kinds index Segment.Kind and Span.Kind.
	Kinds   []KindInfo `json:"kinds"`
	Servers []Server   `json:"servers"`
	// GPUs holds one row per GPU, indexed by GPU ID, each in order of
	// segment start (ties: the order the segments began).
	GPUs []Row `json:"gpus"`
	// Jobs are the visible jobs that appear in the window, in ID order.
	Jobs []JobInfo `json:"jobs"`
	// Hidden counts the jobs in the window that the viewer may not see.
	Hidden int `json:"hidden"`
}

// Server is a server and the GPU IDs it owns: [FirstGPU, FirstGPU+GPUs).
type Server struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	FirstGPU int    `json:"first_gpu"`
	GPUs     int    `json:"gpus"`
}

// Segment is one job on one GPU over [Start, End). Open means it had not
// ended by Now (End is then Now). In JSON it is the array
// [job, kind, start, end, open] with open 0 or 1: a timeline has many.
type Segment struct {
	Job        cluster.JobID
	Kind       int
	Start, End float64
	Open       bool
}

// Span is one state of a job's lane over [Start, End): Kind, on GPUs GPUs
// (0 while waiting). In JSON: [gpus, kind, start, end, open].
type Span struct {
	GPUs       int
	Kind       int
	Start, End float64
	Open       bool
}

// JobInfo is a job as the timeline shows it.
type JobInfo struct {
	ID    cluster.JobID `json:"id"`
	Name  string        `json:"name"`
	User  string        `json:"user"`
	Group string        `json:"group,omitempty"`
	// GPUs is the gang size asked for.
	GPUs int `json:"gpus"`
	// Probe marks a pre-run probe of job Parent.
	Probe     bool          `json:"probe,omitempty"`
	Parent    cluster.JobID `json:"parent"`
	Submitted float64       `json:"submitted"`
	// Ended is when it reached a terminal state, -1 if it has not.
	Ended  float64 `json:"ended"`
	State  string  `json:"state"`
	Reason string  `json:"reason,omitempty"`
	Lane   Lane    `json:"lane,omitempty"`
}

// appendSeg appends [a,b,start,end,open] to buf.
func appendSeg(buf []byte, a int64, b int, start, end float64, open bool) []byte {
	buf = append(buf, '[')
	buf = strconv.AppendInt(buf, a, 10)
	buf = append(buf, ',')
	buf = strconv.AppendInt(buf, int64(b), 10)
	buf = append(buf, ',')
	buf = appendNum(buf, start)
	buf = append(buf, ',')
	buf = appendNum(buf, end)
	if open {
		return append(buf, ",1]"...)
	}
	return append(buf, ",0]"...)
}

// appendNum appends a finite float as a JSON number (shortest exact form).
func appendNum(buf []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(buf, '0') // never stored: times are finite
	}
	return strconv.AppendFloat(buf, f, 'g', -1, 64)
}

func unmarshal5(data []byte) (a int64, b int, start, end float64, open bool, err error) {
	var v []float64
	if err = json.Unmarshal(data, &v); err != nil {
		return
	}
	if len(v) != 5 {
		err = fmt.Errorf("timeline: segment must be [ref, kind, start, end, open], got %d values", len(v))
		return
	}
	return int64(v[0]), int(v[1]), v[2], v[3], v[4] != 0, nil
}

// MarshalJSON writes [job, kind, start, end, open].
func (s Segment) MarshalJSON() ([]byte, error) {
	return appendSeg(nil, int64(s.Job), s.Kind, s.Start, s.End, s.Open), nil
}

// UnmarshalJSON reads [job, kind, start, end, open].
func (s *Segment) UnmarshalJSON(data []byte) error {
	a, b, st, en, op, err := unmarshal5(data)
	*s = Segment{Job: cluster.JobID(a), Kind: b, Start: st, End: en, Open: op}
	return err
}

// MarshalJSON writes [gpus, kind, start, end, open].
func (s Span) MarshalJSON() ([]byte, error) {
	return appendSeg(nil, int64(s.GPUs), s.Kind, s.Start, s.End, s.Open), nil
}

// UnmarshalJSON reads [gpus, kind, start, end, open].
func (s *Span) UnmarshalJSON(data []byte) error {
	a, b, st, en, op, err := unmarshal5(data)
	*s = Span{GPUs: int(a), Kind: b, Start: st, End: en, Open: op}
	return err
}

// Row is one GPU's segments. It encodes in one piece: a timeline has many.
type Row []Segment

// MarshalJSON writes the segments' arrays.
func (r Row) MarshalJSON() ([]byte, error) {
	buf := make([]byte, 0, 2+len(r)*48)
	buf = append(buf, '[')
	for i, s := range r {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendSeg(buf, int64(s.Job), s.Kind, s.Start, s.End, s.Open)
	}
	return append(buf, ']'), nil
}

// Lane is one job's spans, encoded in one piece.
type Lane []Span

// MarshalJSON writes the spans' arrays.
func (l Lane) MarshalJSON() ([]byte, error) {
	buf := make([]byte, 0, 2+len(l)*40)
	buf = append(buf, '[')
	for i, s := range l {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendSeg(buf, int64(s.GPUs), s.Kind, s.Start, s.End, s.Open)
	}
	return append(buf, ']'), nil
}

// Data exports the window q asks for.
func (r *Recorder) Data(q Query) *Data {
	to := q.To
	if to == 0 || to > r.now {
		to = r.now
	}
	from := q.From
	d := &Data{From: q.From, To: to, Start: r.start, Now: r.now, Version: r.version,
		Kinds: append([]KindInfo(nil), r.kinds...), GPUs: make([]Row, len(r.rows))}
	for _, sv := range r.servers {
		d.Servers = append(d.Servers, Server{Name: sv.name, Type: sv.gpuType, FirstGPU: sv.first, GPUs: sv.n})
	}
	visible := func(id cluster.JobID) bool { return q.Visible == nil || q.Visible(r.job(id).user) }
	// in: per job, 1 if shown in the window, 2 if hidden
	in := make([]uint8, r.njobs)
	for g := range r.rows {
		segs := r.rows[g].segs
		out := Row{}
		for i := range segs {
			s := &segs[i]
			if s.start > to {
				break // segments are in order of start
			}
			if !overlaps(s, from, to) {
				continue
			}
			id := cluster.JobID(s.ref)
			sg := Segment{Job: id, Kind: int(s.kind), Start: s.start, End: s.end}
			if s.end == open {
				sg.End, sg.Open = r.now, true
			}
			if visible(id) {
				in[id] = 1
			} else {
				in[id] = 2
				sg.Job = -1
			}
			out = append(out, sg)
		}
		d.GPUs[g] = out
	}
	for id := range r.njobs {
		rec := r.job(cluster.JobID(id))
		if in[id] != 0 {
			continue
		}
		// a job in the window without a GPU segment there: waiting
		end := rec.ended
		if end < 0 {
			end = math.Inf(1)
		}
		if rec.seen && rec.submitted <= to && end >= from {
			if visible(cluster.JobID(id)) {
				in[cluster.JobID(id)] = 1
			} else {
				in[cluster.JobID(id)] = 2
			}
		}
	}
	for id := range r.njobs {
		switch in[id] {
		case 2:
			d.Hidden++
		case 1:
			d.Jobs = append(d.Jobs, r.jobInfo(cluster.JobID(id), from, to, !q.NoLanes))
			if q.Visible != nil {
				ji := &d.Jobs[len(d.Jobs)-1]
				ji.Reason = r.Redact(ji.Reason, q.Visible)
			}
		}
	}
	return d
}

func (r *Recorder) jobInfo(id cluster.JobID, from, to float64, lanes bool) JobInfo {
	rec := r.job(cluster.JobID(id))
	ji := JobInfo{ID: id, Name: rec.name, User: rec.user, Group: rec.group, GPUs: rec.gang, Probe: rec.probe,
		Parent: rec.parent, Submitted: rec.submitted, Ended: rec.ended, State: rec.state.String(), Reason: rec.reason}
	if !lanes {
		return ji
	}
	for _, s := range rec.lane {
		if !overlaps(&s, from, to) {
			continue
		}
		sp := Span{GPUs: int(s.ref), Kind: int(s.kind), Start: s.start, End: s.end}
		if s.end == open {
			sp.End, sp.Open = r.now, true
		}
		ji.Lane = append(ji.Lane, sp)
	}
	return ji
}

// overlaps reports whether s shows in the window [from, to]: it lasts into
// the window, or it is open and began by its end.
func overlaps(s *seg, from, to float64) bool {
	if s.kind == dead {
		return false
	}
	if s.end == open {
		return s.start <= to
	}
	return s.start < to && s.end > from
}
