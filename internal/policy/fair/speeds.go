package fair

import (
	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// speeds holds what profiling measured about each job type (JobSpec.Model;
// the paper assumes each user submits one type): per GPU type, the jobs'
// best solo seconds per mini-batch (cluster.Profile.Solo). It never reads the
// simulator's model: only samples the jobs reported.
type speeds struct {
	types  []cluster.GPUType
	models map[string]*modelSpeed
}

// modelSpeed sums the solo times of one job type's jobs.
type modelSpeed struct {
	// sum[t] and n[t]: Σ and count of the jobs' solo times on type t.
	sum []float64
	n   []int
	// pair[a][b] sums, over jobs measured on both, solo(b)/solo(a): how much
	// faster a is than b for the same job; pairN counts them.
	pair  [][]float64
	pairN [][]int
	// on[t] counts the active jobs of this type assigned to GPU type t.
	on []int
}

func newSpeeds(types []cluster.GPUType) *speeds {
	return &speeds{types: types, models: map[string]*modelSpeed{}}
}

func (s *speeds) model(name string) *modelSpeed {
	m := s.models[name]
	if m == nil {
		n := len(s.types)
		m = &modelSpeed{sum: make([]float64, n), n: make([]int, n), pair: make([][]float64, n), pairN: make([][]int, n), on: make([]int, n)}
		for i := range m.pair {
			m.pair[i] = make([]float64, n)
			m.pairN[i] = make([]int, n)
		}
		s.models[name] = m
	}
	return m
}

// update folds a job's latest solo times in (replacing what it contributed
// before, kept in old) and reports whether the type's estimates changed.
func (s *speeds) update(name string, old []float64, solo []float64) (changed bool, kept []float64) {
	m := s.model(name)
	n := len(s.types)
	kept = old
	if len(kept) < n {
		kept = append(kept, make([]float64, n-len(kept))...)
	}
	for t := 0; t < n && t < len(solo); t++ {
		if solo[t] <= 0 || solo[t] == kept[t] {
			continue
		}
		changed = true
		if kept[t] > 0 {
			m.sum[t] -= kept[t]
			m.n[t]--
		}
		m.sum[t] += solo[t]
		m.n[t]++
	}
	if !changed {
		return false, kept
	}
	// pairs: remove the old contributions, add the new ones
	for a := 0; a < n; a++ {
		for b := 0; b < n; b++ {
			if a == b {
				continue
			}
			if kept[a] > 0 && kept[b] > 0 {
				m.pair[a][b] -= kept[b] / kept[a]
				m.pairN[a][b]--
			}
			na, nb := pick(solo, kept, a), pick(solo, kept, b)
			if na > 0 && nb > 0 {
				m.pair[a][b] += nb / na
				m.pairN[a][b]++
			}
		}
	}
	for t := 0; t < n; t++ {
		if t < len(solo) && solo[t] > 0 {
			kept[t] = solo[t]
		}
	}
	return true, kept
}

func pick(solo, kept []float64, t int) float64 {
	if t < len(solo) && solo[t] > 0 {
		return solo[t]
	}
	return kept[t]
}

// forget removes a finished job's contribution.
func (s *speeds) forget(name string, kept []float64) {
	m := s.models[name]
	if m == nil {
		return
	}
	n := len(s.types)
	for a := 0; a < n && a < len(kept); a++ {
		if kept[a] <= 0 {
			continue
		}
		m.sum[a] -= kept[a]
		m.n[a]--
		for b := 0; b < n && b < len(kept); b++ {
			if a != b && kept[b] > 0 {
				m.pair[a][b] -= kept[b] / kept[a]
				m.pairN[a][b]--
			}
		}
	}
}

// measured reports whether some job of the type has a solo time on type t.
func (s *speeds) measured(name string, t int) bool {
	m := s.models[name]
	return m != nil && t < len(m.n) && m.n[t] > 0
}

// speedup returns how many times faster the job type trains on GPU type a
// than on b, and whether it was measured: from jobs measured on both when
// there are some, else from the mean solo times on each, else the types'
// generic speeds (configuration, not measurement).
func (s *speeds) speedup(name string, a, b int) (float64, bool) {
	if a == b {
		return 1, true
	}
	if m := s.models[name]; m != nil {
		if k := m.pairN[a][b]; k > 0 {
			return m.pair[a][b] / float64(k), true
		}
		if m.n[a] > 0 && m.n[b] > 0 {
			ta, tb := m.sum[a]/float64(m.n[a]), m.sum[b]/float64(m.n[b])
			if ta > 0 {
				return tb / ta, true
			}
		}
	}
	return s.types[a].Speed / s.types[b].Speed, false
}
