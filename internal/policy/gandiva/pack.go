package gandiva

import (
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
)

// pairKey is an unordered pair of model names.
func pairKey(a, b *cluster.Job) [2]string {
	x, y := a.Spec.Model, b.Spec.Model
	if y < x {
		x, y = y, x
	}
	return [2]string{x, y}
}

// canPack reports whether b may be packed onto a's GPUs: same home, both
// measured alone on this GPU type, peak memory fitting together, and the
// pair of models not already found to lose.
func (p *Policy) canPack(s *cluster.Snapshot, a, b *cluster.Job) bool {
	ja, jb := &p.st.Jobs[a.ID], &p.st.Jobs[b.ID]
	if ja.Partner != cluster.NoJob || jb.Partner != cluster.NoJob || ja.Dropped || jb.Dropped || ja.Prio > 0 || jb.Prio > 0 {
		return false
	}
	if !slices.Equal(ja.Home, jb.Home) || len(ja.Borrowed) > 0 || len(jb.Borrowed) > 0 {
		return false
	}
	if a.Spec.MemGiB <= 0 || b.Spec.MemGiB <= 0 {
		return false // unknown memory: never risk an out-of-memory
	}
	for _, sl := range ja.Home {
		if a.Spec.MemGiB+b.Spec.MemGiB > s.Cluster.TypeOf(sl.Server).MemGiB {
			return false
		}
	}
	t := s.Cluster.Servers[ja.Home[0].Server].Type
	if a.Profile.SoloIterTime(t) <= 0 || b.Profile.SoloIterTime(t) <= 0 {
		return false // introspection needs both solo rates first
	}
	if good, tried := p.pairs[pairKey(a, b)]; tried && !good {
		return false
	}
	return true
}

// packTrials runs at a boundary after the turn plan: a waiting job that
// could not get its turn is packed onto its home GPUs next to the job that
// got them, when canPack allows. The trial is judged by judgePacking.
func (p *Policy) packTrials(s *cluster.Snapshot) {
	pl := &p.plan
	for _, b := range p.turnOrder(s) {
		jb := &p.st.Jobs[b.ID]
		if pl.Chosen(b.ID) || !p.eligible(s, b) || b.State == cluster.Migrating || jb.Partner != cluster.NoJob {
			continue
		}
		srv := &s.Cluster.Servers[jb.Home[0].Server]
		for i := 0; i < srv.NumGPUs; i++ {
			g := srv.FirstGPU + cluster.GPUID(i)
			if b.State == cluster.Running {
				// a running job is packed where it runs, never moved for a trial
				if len(b.GPUs) == 0 || g != b.GPUs[0] {
					continue
				}
			}
			aid := pl.Holder(g)
			if aid == cluster.NoJob || pl.share[aid] || !slices.Equal(place.SlotsOf(s.Cluster, pl.Target(aid)), jb.Home) ||
				(b.State == cluster.Running && !slices.Equal(pl.Target(aid), b.GPUs)) {
				continue
			}
			a := s.Jobs[aid]
			if moveCost(b, pl.Target(aid)) > 0 {
				continue // a trial gains nothing known yet: not worth a move (cost.go)
			}
			if p.crowded(s, aid, b.ID) || !p.canPack(s, a, b) {
				continue
			}
			ja := &p.st.Jobs[a.ID]
			ja.Partner, jb.Partner = b.ID, a.ID
			ja.PackedAt, jb.PackedAt = s.Now, s.Now
			if good, tried := p.pairs[pairKey(a, b)]; tried && good {
				ja.PackedAt, jb.PackedAt = 0, 0 // a known good pair: keep without a trial
			}
			pl.ChooseShared(b.ID, pl.Target(aid), "pack-trial")
			pl.Waiting--
			break
		}
	}
}

// crowded reports whether a's target GPUs hold, in the engine, another job
// the plan keeps (a pair that early feedback split but that still shares
// the GPUs while it migrates, say): a third job must not join them.
func (p *Policy) crowded(s *cluster.Snapshot, a, b cluster.JobID) bool {
	for _, g := range p.plan.Target(a) {
		for _, h := range s.GPUs[g].Jobs {
			if h != a && h != b && p.plan.Chosen(h) {
				return true
			}
		}
	}
	return false
}

// packedSample returns j's latest sample taken while packed with partner
// after since, or nil.
func packedSample(j *cluster.Job, partner cluster.JobID, since float64) *cluster.Sample {
	for i := len(j.Profile.Samples) - 1; i >= 0; i-- {
		sm := &j.Profile.Samples[i]
		if sm.At <= since {
			return nil
		}
		if sm.Shared && sm.IterTime > 0 && slices.Contains(sm.Neighbors, partner) {
			return sm
		}
	}
	return nil
}

// judgePacking decides a packing trial once both jobs have reported a rate
// while packed: keep it if their normalised progress (packed rate ÷ solo
// rate, summed) is at least 1 + margin, i.e. better than taking turns;
// otherwise unpack, stop the job that joined, and remember the pair of
// models as a loss.
func (p *Policy) judgePacking(s *cluster.Snapshot, j *cluster.Job) {
	ji := &p.st.Jobs[j.ID]
	if ji.Partner == cluster.NoJob || ji.PackedAt == 0 {
		return
	}
	q := s.Jobs[ji.Partner]
	if q.State.Terminal() {
		p.st.Unpack(j.ID)
		return
	}
	sa, sb := packedSample(j, q.ID, ji.PackedAt), packedSample(q, j.ID, ji.PackedAt)
	if sa == nil || sb == nil {
		return
	}
	ta, tb := j.Profile.SoloIterTime(sa.Type), q.Profile.SoloIterTime(sb.Type)
	if ta <= 0 || tb <= 0 {
		return
	}
	norm := ta/sa.IterTime + tb/sb.IterTime
	key := pairKey(j, q)
	if norm >= 1+p.prm.PackMargin {
		p.pairs[key] = true
		ji.PackedAt, p.st.Jobs[q.ID].PackedAt = 0, 0
		return
	}
	p.pairs[key] = false
	// revert: the job that started later in this turn leaves
	leaver := q.ID
	if ji.SliceStart > p.st.Jobs[q.ID].SliceStart || (ji.SliceStart == p.st.Jobs[q.ID].SliceStart && j.ID > q.ID) {
		leaver = j.ID
	}
	p.st.Unpack(j.ID)
	if s.Jobs[leaver].State == cluster.Running {
		p.stop = append(p.stop, leaver)
	}
}
