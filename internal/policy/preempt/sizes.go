package preempt

import "math"

// Sizes counts a policy's waiting jobs by gang size, for Input.MinWaiting:
// the planner stops scanning for waiting jobs once fewer GPUs are left than
// the smallest of them needs. The zero value is empty.
type Sizes []int

// Add counts a waiting job of g GPUs.
func (s *Sizes) Add(g int) {
	for len(*s) <= g {
		*s = append(*s, 0)
	}
	(*s)[g]++
}

// Remove uncounts a waiting job of g GPUs (one Add counted it).
func (s Sizes) Remove(g int) { s[g]-- }

// Min is the smallest gang size of a waiting job, math.MaxInt32 if none.
func (s Sizes) Min() int {
	for g := 1; g < len(s); g++ {
		if s[g] > 0 {
			return g
		}
	}
	return math.MaxInt32
}
