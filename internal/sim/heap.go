package sim

import "github.com/gandiva-sched/gandiva/internal/cluster"

type evKind uint8

const (
	evFinish evKind = iota
	evProfile
	evActionDone
	evFail
	evTick
	evNodeDown
	evNodeUp
	evSetting // Config.Settings[job]
)

// item is one scheduled simulator event. Items are ordered by (t, seq): a
// total order, so equal times resolve by the order of scheduling.
type item struct {
	t    float64
	seq  uint64
	kind evKind
	job  cluster.JobID
	ver  uint32
	node cluster.ServerID
	user bool
	// periodic marks a progress report at an epoch boundary (ReportEvery).
	periodic bool
}

func (a *item) less(b *item) bool {
	if a.t != b.t {
		return a.t < b.t
	}
	return a.seq < b.seq
}

// eventHeap is a binary min-heap of items by value.
type eventHeap struct {
	items []item
	seq   uint64
}

func (h *eventHeap) Len() int { return len(h.items) }

func (h *eventHeap) push(it item) {
	h.seq++
	it.seq = h.seq
	h.items = append(h.items, it)
	i := len(h.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.items[i].less(&h.items[p]) {
			break
		}
		h.items[i], h.items[p] = h.items[p], h.items[i]
		i = p
	}
}

func (h *eventHeap) peek() *item { return &h.items[0] }

func (h *eventHeap) pop() item {
	top := h.items[0]
	n := len(h.items) - 1
	h.items[0] = h.items[n]
	h.items = h.items[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.items[r].less(&h.items[l]) {
			m = r
		}
		if !h.items[m].less(&h.items[i]) {
			break
		}
		h.items[i], h.items[m] = h.items[m], h.items[i]
		i = m
	}
	return top
}
