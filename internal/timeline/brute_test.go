package timeline_test

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/timeline"
)

// brute is the simple builder the Recorder is checked against: after every
// observation it writes down the whole state from scratch (every GPU's
// holders and parked jobs, every job's lane), and it builds segments by run
// length over those observations, merging what touches and dropping what
// lasted no time.
type brute struct {
	kinds    map[timeline.Kind]int
	classify timeline.Classify
	noParked bool
	now      float64
	gpus     []map[bkey]float64 // open: (job, kind) → start
	gpuSegs  [][]timeline.Segment
	lanes    map[cluster.JobID]*blane
	laneSegs map[cluster.JobID][]timeline.Span
}

type bkey struct {
	ref  int
	kind int
}

type blane struct {
	key   bkey
	start float64
}

func newBrute(kinds []timeline.KindInfo, classify timeline.Classify, noParked bool) *brute {
	b := &brute{kinds: map[timeline.Kind]int{}, classify: classify, noParked: noParked,
		lanes: map[cluster.JobID]*blane{}, laneSegs: map[cluster.JobID][]timeline.Span{}}
	if b.classify == nil {
		b.classify = timeline.DefaultClassify
	}
	for i, k := range kinds {
		b.kinds[k.Kind] = i
	}
	return b
}

func (b *brute) kind(k timeline.Kind) int {
	i, ok := b.kinds[k]
	if !ok {
		panic(fmt.Sprintf("brute: unknown kind %q", k))
	}
	return i
}

func (b *brute) observe(s *cluster.Snapshot) {
	b.now = s.Now
	for len(b.gpus) < len(s.GPUs) {
		b.gpus = append(b.gpus, map[bkey]float64{})
		b.gpuSegs = append(b.gpuSegs, nil)
	}
	want := make([]map[bkey]bool, len(s.GPUs))
	for g := range s.GPUs {
		want[g] = map[bkey]bool{}
		for _, h := range s.GPUs[g].Jobs {
			if k := b.classify(s.Jobs[h], len(s.GPUs[g].Jobs) > 1); k != "" {
				want[g][bkey{int(h), b.kind(k)}] = true
			}
		}
	}
	for _, j := range s.Jobs {
		if !b.noParked && j.State == cluster.Suspended && j.Home != cluster.NoServer {
			for _, g := range j.Last {
				want[g][bkey{int(j.ID), b.kind(b.classify(j, false))}] = true
			}
		}
	}
	for g := range s.GPUs {
		for k, start := range b.gpus[g] {
			if !want[g][k] {
				b.gpuSegs[g] = append(b.gpuSegs[g], timeline.Segment{Job: cluster.JobID(k.ref), Kind: k.kind, Start: start, End: s.Now})
				delete(b.gpus[g], k)
			}
		}
		for k := range want[g] {
			if _, ok := b.gpus[g][k]; !ok {
				b.gpus[g][k] = s.Now
			}
		}
	}
	for _, j := range s.Jobs {
		var key bkey
		on := false
		if j.State.Holding() {
			shared := false
			for _, g := range j.GPUs {
				shared = shared || len(s.GPUs[g].Jobs) > 1
			}
			if k := b.classify(j, shared); k != "" {
				key, on = bkey{len(j.GPUs), b.kind(k)}, true
			}
		} else if k := b.classify(j, false); k != "" {
			key, on = bkey{0, b.kind(k)}, true
		}
		cur := b.lanes[j.ID]
		if cur != nil && (!on || cur.key != key) {
			b.laneSegs[j.ID] = append(b.laneSegs[j.ID], timeline.Span{GPUs: cur.key.ref, Kind: cur.key.kind, Start: cur.start, End: s.Now})
			delete(b.lanes, j.ID)
			cur = nil
		}
		if on && cur == nil {
			b.lanes[j.ID] = &blane{key: key, start: s.Now}
		}
	}
}

// gpuRow returns GPU g's segments, open ones ending at now, merged and sorted.
func (b *brute) gpuRow(g int) []timeline.Segment {
	segs := slices.Clone(b.gpuSegs[g])
	for k, start := range b.gpus[g] {
		segs = append(segs, timeline.Segment{Job: cluster.JobID(k.ref), Kind: k.kind, Start: start, End: b.now, Open: true})
	}
	return normSegs(segs)
}

func (b *brute) lane(id cluster.JobID) []timeline.Span {
	spans := slices.Clone(b.laneSegs[id])
	if cur := b.lanes[id]; cur != nil {
		spans = append(spans, timeline.Span{GPUs: cur.key.ref, Kind: cur.key.kind, Start: cur.start, End: b.now, Open: true})
	}
	// as segments with the width as the job, to share the normalisation
	segs := make([]timeline.Segment, len(spans))
	for i, s := range spans {
		segs[i] = timeline.Segment{Job: cluster.JobID(s.GPUs), Kind: s.Kind, Start: s.Start, End: s.End, Open: s.Open}
	}
	segs = normSegs(segs)
	out := make([]timeline.Span, len(segs))
	for i, s := range segs {
		out[i] = timeline.Span{GPUs: int(s.Job), Kind: s.Kind, Start: s.Start, End: s.End, Open: s.Open}
	}
	return out
}

// normSegs drops segments that lasted no time (and are not open), merges a
// segment into the one of the same job and kind that ended when it began,
// and sorts by (start, job, kind).
func normSegs(segs []timeline.Segment) []timeline.Segment {
	slices.SortFunc(segs, cmpSeg)
	var out []timeline.Segment
	for _, s := range segs {
		if s.Start == s.End && !s.Open {
			continue
		}
		merged := false
		for i := range out {
			if o := &out[i]; o.Job == s.Job && o.Kind == s.Kind && !o.Open && o.End == s.Start {
				o.End, o.Open = s.End, s.Open
				merged = true
				break
			}
		}
		if !merged {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, cmpSeg)
	return out
}

func cmpSeg(a, b timeline.Segment) int {
	return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Job, b.Job), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.End, b.End))
}

// compare checks a recorder's export against the brute builder; it
// returns the first difference.
func compare(b *brute, d *timeline.Data, jobs int) error {
	if len(d.GPUs) != len(b.gpus) {
		return fmt.Errorf("rows: %d, brute %d", len(d.GPUs), len(b.gpus))
	}
	for g := range d.GPUs {
		got := normSegs(slices.Clone(d.GPUs[g]))
		if len(got) != len(d.GPUs[g]) {
			return fmt.Errorf("GPU %d: the recorder's row is not normalised: %v", g, d.GPUs[g])
		}
		if !slices.IsSortedFunc(d.GPUs[g], func(a, b timeline.Segment) int { return cmp.Compare(a.Start, b.Start) }) {
			return fmt.Errorf("GPU %d: segments not in order of start: %v", g, d.GPUs[g])
		}
		if want := b.gpuRow(g); !slices.Equal(got, want) {
			return fmt.Errorf("GPU %d:\n got  %s\n want %s", g, fmtSegs(got), fmtSegs(want))
		}
	}
	byID := map[cluster.JobID]timeline.JobInfo{}
	for _, j := range d.Jobs {
		byID[j.ID] = j
	}
	for id := range cluster.JobID(jobs) {
		want := b.lane(id)
		got := byID[id].Lane
		if len(want) == 0 && len(got) == 0 {
			continue
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("job %d lane:\n got  %v\n want %v", id, got, want)
		}
	}
	return nil
}

func fmtSegs(segs []timeline.Segment) string {
	var sb strings.Builder
	for _, s := range segs {
		end := fmt.Sprint(s.End)
		if s.Open {
			end += "+"
		}
		if math.IsInf(s.End, 0) {
			end = "inf"
		}
		fmt.Fprintf(&sb, "[j%d k%d %g-%s] ", s.Job, s.Kind, s.Start, end)
	}
	return sb.String()
}
