package policy

import "math"

// Sizes counts a policy's waiting jobs by gang size, so that a scan can stop
// once fewer GPUs are left than the smallest of them needs (fjf; the
// preempt planner's Input.MinWaiting). The zero value is empty.
type Sizes []int

// Add counts a waiting job of g GPUs.
func (s *Sizes) Add(g int) { s.change(g, 1) }

// Remove uncounts a waiting job of g GPUs (that Add counted).
func (s *Sizes) Remove(g int) { s.change(g, -1) }

func (s *Sizes) change(g, n int) {
	for len(*s) <= g {
		*s = append(*s, 0)
	}
	(*s)[g] += n
}

// Reset empties the count.
func (s Sizes) Reset() { clear(s) }

// Min is the smallest gang size of a waiting job, math.MaxInt32 if none.
func (s Sizes) Min() int {
	for g := 1; g < len(s); g++ {
		if s[g] > 0 {
			return g
		}
	}
	return math.MaxInt32
}
