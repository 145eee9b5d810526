package ui

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/timeline"
)

// A report's timelines are written packed: a time-sliced simulation has
// millions of segments, most of which start where the one before them on
// the row ended and last a whole quantum, so each row (and each job's
// lane) is one flat array of four numbers per segment,
//
//	ref, flags, start, end
//
// where ref is the segment's job (a lane's: its GPUs), flags is
// kind*8 + open + 2*(start absolute) + 4*(end absolute), start is the
// gap since the previous segment's end on the row (the first: since 0)
// and end the segment's length, each unless flagged absolute. A time is
// written relative only when adding it back gives exactly the same float64
// (in Go as in JavaScript: both add in IEEE 754 double precision), so
// unpacking is exact. The arrays are several times shorter than
// [job, kind, start, end, open] and compress to a tenth of it, quickly.
// report.js unpacks them in the page, ReadReport here.

// packFlags are the flags' bits below the kind.
const (
	packOpen     = 1
	packStartAbs = 2
	packEndAbs   = 4
	packKindMul  = 8
)

// packedSegs is a row or a lane, packed.
type packedSegs []byte

// MarshalJSON writes the flat array (it is built as JSON already).
func (p packedSegs) MarshalJSON() ([]byte, error) {
	if len(p) == 0 {
		return []byte("[]"), nil
	}
	return p, nil
}

// packSegs packs segments given as (ref, kind, start, end, open).
func packSegs(n int, seg func(i int) (int64, int, float64, float64, bool)) packedSegs {
	buf := make([]byte, 0, 2+n*16)
	buf = append(buf, '[')
	prev := 0.0
	for i := range n {
		ref, kind, start, end, open := seg(i)
		flags := int64(kind) * packKindMul
		if open {
			flags |= packOpen
		}
		s := start - prev
		if prev+s != start {
			s, flags = start, flags|packStartAbs
		}
		e := end - start
		if start+e != end {
			e, flags = end, flags|packEndAbs
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = strconv.AppendInt(buf, ref, 10)
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, flags, 10)
		buf = append(buf, ',')
		buf = appendNum(buf, s)
		buf = append(buf, ',')
		buf = appendNum(buf, e)
		prev = end
	}
	return append(buf, ']')
}

// appendNum appends a finite float as a JSON number (shortest exact form).
func appendNum(buf []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(buf, '0') // never stored: times are finite
	}
	return strconv.AppendFloat(buf, f, 'g', -1, 64)
}

// unpackSegs is packSegs' inverse: add(ref, kind, start, end, open) per segment.
func unpackSegs(v []float64, add func(int64, int, float64, float64, bool)) error {
	if len(v)%4 != 0 {
		return fmt.Errorf("a packed row of %d numbers, not a multiple of 4", len(v))
	}
	prev := 0.0
	for i := 0; i < len(v); i += 4 {
		flags := int64(v[i+1])
		if float64(flags) != v[i+1] || flags < 0 {
			return fmt.Errorf("packed segment %d: flags %v", i/4, v[i+1])
		}
		start, end := v[i+2], v[i+3]
		if flags&packStartAbs == 0 {
			start += prev
		}
		if flags&packEndAbs == 0 {
			end += start
		}
		add(int64(v[i]), int(flags/packKindMul), start, end, flags&packOpen != 0)
		prev = end
	}
	return nil
}

// packedJob is a job with its lane packed.
type packedJob struct {
	timeline.JobInfo
	Lane packedSegs `json:"lane,omitempty"`
}

// packedData is a timeline with its rows and lanes packed; Packed marks it.
type packedData struct {
	*timeline.Data
	Packed int          `json:"packed"`
	GPUs   []packedSegs `json:"gpus"`
	Jobs   []packedJob  `json:"jobs"`
}

func pack(d *timeline.Data) *packedData {
	p := &packedData{Data: d, Packed: 1}
	if d.GPUs != nil { // nil stays null
		p.GPUs = make([]packedSegs, len(d.GPUs))
	}
	if d.Jobs != nil {
		p.Jobs = make([]packedJob, len(d.Jobs))
	}
	for g, row := range d.GPUs {
		p.GPUs[g] = packSegs(len(row), func(i int) (int64, int, float64, float64, bool) {
			s := row[i]
			return int64(s.Job), s.Kind, s.Start, s.End, s.Open
		})
	}
	for k, j := range d.Jobs {
		p.Jobs[k].JobInfo = j
		p.Jobs[k].JobInfo.Lane = nil
		if len(j.Lane) > 0 {
			p.Jobs[k].Lane = packSegs(len(j.Lane), func(i int) (int64, int, float64, float64, bool) {
				s := j.Lane[i]
				return int64(s.GPUs), s.Kind, s.Start, s.End, s.Open
			})
		}
	}
	return p
}

// packedReport is a Report as written: its timelines packed.
type packedReport struct {
	Title    string      `json:"title"`
	Subtitle string      `json:"subtitle,omitempty"`
	Runs     []packedRun `json:"runs"`
}

type packedRun struct {
	ReportRun
	Timeline *packedData `json:"timeline"`
}

func packReport(r *Report) *packedReport {
	p := &packedReport{Title: r.Title, Subtitle: r.Subtitle, Runs: make([]packedRun, len(r.Runs))}
	for i, run := range r.Runs {
		p.Runs[i] = packedRun{ReportRun: run, Timeline: pack(run.Timeline)}
	}
	return p
}

// unpackedData reads a packed timeline back.
type unpackedData struct {
	timeline.Data
	Packed int         `json:"packed"`
	GPUs   [][]float64 `json:"gpus"`
	Jobs   []struct {
		timeline.JobInfo
		Lane []float64 `json:"lane"`
	} `json:"jobs"`
}

// unpackReport decodes data as WriteReport wrote it, or as it wrote it
// before timelines were packed (plain JSON).
func unpackReport(data []byte) (*Report, error) {
	var probe struct {
		Runs []struct {
			Timeline *struct {
				Packed int `json:"packed"`
			} `json:"timeline"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, err
	}
	if len(probe.Runs) == 0 || probe.Runs[0].Timeline == nil || probe.Runs[0].Timeline.Packed == 0 {
		var r Report
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, err
		}
		return &r, nil
	}
	var w struct {
		Title    string `json:"title"`
		Subtitle string `json:"subtitle"`
		Runs     []struct {
			ReportRun
			Timeline *unpackedData `json:"timeline"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, err
	}
	r := &Report{Title: w.Title, Subtitle: w.Subtitle, Runs: make([]ReportRun, len(w.Runs))}
	for i, run := range w.Runs {
		r.Runs[i] = run.ReportRun
		u := run.Timeline
		if u == nil {
			continue
		}
		if u.Packed != 1 {
			return nil, fmt.Errorf("run %d: timeline packed as %d, want 1", i+1, u.Packed)
		}
		d := u.Data
		d.GPUs, d.Jobs = nil, nil
		if u.GPUs != nil {
			d.GPUs = make([]timeline.Row, len(u.GPUs))
		}
		if u.Jobs != nil {
			d.Jobs = make([]timeline.JobInfo, len(u.Jobs))
		}
		for g, v := range u.GPUs {
			if err := unpackSegs(v, func(ref int64, kind int, start, end float64, open bool) {
				d.GPUs[g] = append(d.GPUs[g], timeline.Segment{Job: cluster.JobID(ref), Kind: kind, Start: start, End: end, Open: open})
			}); err != nil {
				return nil, fmt.Errorf("run %d, GPU %d: %w", i+1, g, err)
			}
		}
		for k, j := range u.Jobs {
			d.Jobs[k] = j.JobInfo
			d.Jobs[k].Lane = nil
			if err := unpackSegs(j.Lane, func(ref int64, kind int, start, end float64, open bool) {
				d.Jobs[k].Lane = append(d.Jobs[k].Lane, timeline.Span{GPUs: int(ref), Kind: kind, Start: start, End: end, Open: open})
			}); err != nil {
				return nil, fmt.Errorf("run %d, job %d: %w", i+1, j.ID, err)
			}
		}
		r.Runs[i].Timeline = &d
	}
	return r, nil
}
