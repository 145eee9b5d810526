package cluster

// Sample is one application-level measurement of a job: how fast it trained
// where it ran. It is the only source of rates that policies may use.
type Sample struct {
	At       float64
	Done     float64 // mini-batches done at At
	IterTime float64 // measured seconds per mini-batch
	Type     int     // GPU type index of the placement
	Width    int     // GPUs held
	Servers  int     // distinct servers spanned
	Shared   bool    // some GPU was shared with another job
	// Neighbors are the jobs that shared a GPU with this one, in ID order.
	Neighbors []JobID
}

// Rate is the measured mini-batches per second.
func (s *Sample) Rate() float64 {
	if s.IterTime <= 0 {
		return 0
	}
	return 1 / s.IterTime
}

// MaxSamples bounds a job's kept history.
const MaxSamples = 32

// Profile is a job's measurement history.
type Profile struct {
	// Samples are the latest measurements, oldest first, at most MaxSamples.
	Samples []Sample
	// Solo holds, per GPU type index, the best measured seconds per mini-batch
	// when the job ran alone on its GPUs (not shared); 0 where never measured.
	Solo []float64
}

// Last returns the latest sample, or nil.
func (p *Profile) Last() *Sample {
	if len(p.Samples) == 0 {
		return nil
	}
	return &p.Samples[len(p.Samples)-1]
}

// SoloIterTime returns the best solo seconds per mini-batch on GPU type t, or 0.
func (p *Profile) SoloIterTime(t int) float64 {
	if t < 0 || t >= len(p.Solo) {
		return 0
	}
	return p.Solo[t]
}

// Add appends a sample, dropping the oldest beyond MaxSamples, and updates Solo.
func (p *Profile) Add(s Sample) {
	if len(p.Samples) == MaxSamples {
		copy(p.Samples, p.Samples[1:])
		p.Samples = p.Samples[:MaxSamples-1]
	}
	p.Samples = append(p.Samples, s)
	if !s.Shared && s.IterTime > 0 && s.Type >= 0 {
		for len(p.Solo) <= s.Type {
			p.Solo = append(p.Solo, 0)
		}
		if p.Solo[s.Type] == 0 || s.IterTime < p.Solo[s.Type] {
			p.Solo[s.Type] = s.IterTime
		}
	}
}
