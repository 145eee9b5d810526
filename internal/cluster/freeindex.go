package cluster

import "math/bits"

// FreeIndex indexes servers by their number of free GPUs, so that best-fit
// placement need not scan every server. Servers that are not schedulable
// count as having none free. The engine keeps one up to date; placement
// copies it and updates the copy as it plans.
type FreeIndex struct {
	// byCount[k] is a bitset of the servers with exactly k free GPUs.
	byCount [MaxGPUsPerServer + 1][]uint64
	top     int     // byCount[k] is empty for k ≥ top
	count   []uint8 // per server
	total   int
	maxSize int
}

// Set records that server s has n free GPUs (and at most size GPUs).
func (x *FreeIndex) Set(s ServerID, n, size int) {
	words := (int(s) + 64) / 64
	for len(x.count) <= int(s) {
		x.count = append(x.count, 0)
		x.mark(ServerID(len(x.count)-1), 0, words)
	}
	x.maxSize = max(x.maxSize, size)
	old := int(x.count[s])
	if old == n {
		return
	}
	x.byCount[old][s/64] &^= 1 << uint(s%64)
	x.mark(s, n, words)
	x.count[s] = uint8(n)
	x.total += n - old
}

func (x *FreeIndex) mark(s ServerID, n, words int) {
	x.top = max(x.top, n+1)
	for len(x.byCount[n]) < words {
		x.byCount[n] = append(x.byCount[n], 0)
	}
	x.byCount[n][s/64] |= 1 << uint(s%64)
}

// Count returns the free GPUs of server s.
func (x *FreeIndex) Count(s ServerID) int {
	if int(s) >= len(x.count) {
		return 0
	}
	return int(x.count[s])
}

// Total is the number of free GPUs on schedulable servers.
func (x *FreeIndex) Total() int { return x.total }

// MaxSize is the largest server's GPU count.
func (x *FreeIndex) MaxSize() int { return x.maxSize }

// BestFit returns the lowest-ID server among those with the fewest free
// GPUs that are at least n, or -1.
func (x *FreeIndex) BestFit(n int) ServerID {
	for k := max(n, 1); k <= x.maxSize; k++ {
		for w, word := range x.byCount[k] {
			if word != 0 {
				return ServerID(w*64 + bits.TrailingZeros64(word))
			}
		}
	}
	return -1
}

// CopyFrom makes x a copy of o, reusing x's buffers. (Placement copies
// the engine's index at every plan: only the counts either has used are
// copied, not all MaxGPUsPerServer+1.)
func (x *FreeIndex) CopyFrom(o *FreeIndex) {
	for k := range max(x.top, o.top) {
		x.byCount[k] = append(x.byCount[k][:0], o.byCount[k]...)
	}
	x.top = o.top
	x.count = append(x.count[:0], o.count...)
	x.total = o.total
	x.maxSize = o.maxSize
}
