package cluster

import (
	"fmt"
	"math"
	"reflect"
	"slices"
)

// Digest fingerprints a snapshot part by part: two digests of one snapshot,
// taken before and after a reader had it, tell whether the reader wrote to
// it and where (Diff). Everything a policy can reach from the snapshot
// counts: every field of every job (its spec and profile included, and the
// service the engine keeps unexported), the GPUs' and servers' states, the
// cluster, the events, the free index, and which jobs the lists hold.
//
// It is for checks (engine Options.CheckSnapshot): a digest costs a walk of
// the whole snapshot. A test fails if a field is added to a type the
// snapshot reaches and not to the digest.
type Digest struct {
	sums                []uint64
	jobs, gpus, servers int
	// the job records the lists hold (their identity; sums cover contents)
	list, active []*Job
}

// digestHead names the parts of a digest before the jobs'.
var digestHead = [...]string{"Now", "the cluster", "the events", "the rejections", "FreeGPUs", "the free index", "Allowed", "Unit"}

// jobFieldNames names the parts of one job, in the order jobSums appends
// them: the fields of Job.
var jobFieldNames = [...]string{"ID", "Spec", "State", "GPUs", "Last", "Home", "Shared", "attained", "attainedAt", "executed",
	"Done", "DoneAt", "Profile", "Metric", "MetricAt", "Submitted", "FirstStart", "QueuedAt", "Ended", "NotBefore",
	"Starts", "Suspends", "Resumes", "Migrations", "Resizes", "Packs", "Attempts", "UserErrors", "Reason", "Seq",
	"PreRun", "Probe", "Parent", "StartingUp", "ProcStart", "ReadyAt", "StartUp", "StartUpEst", "Warmed", "PreRunHere",
	"Saved", "SavedAt"}

// funcID identifies a func value: 0 for nil, else its code pointer (two
// closures of one function are not told apart).
func funcID(f any) uintptr {
	v := reflect.ValueOf(f)
	if v.Kind() != reflect.Func || v.IsNil() {
		return 0
	}
	return v.Pointer()
}

// Take fills d with the digest of s, reusing d's memory.
func (d *Digest) Take(s *Snapshot) {
	d.sums = d.sums[:0]
	d.jobs, d.gpus, d.servers = len(s.Jobs), len(s.GPUs), len(s.Servers)
	d.sums = append(d.sums, mix(seed, math.Float64bits(s.Now)), hashCluster(s.Cluster))
	h := mix(seed, uint64(len(s.Events)))
	for i := range s.Events {
		h = hashEvent(h, &s.Events[i])
	}
	d.sums = append(d.sums, h, hashRejections(s.Rejected))
	d.sums = append(d.sums, mix(seed, uint64(s.FreeGPUs)), hashFree(s.Free), mix(seed, uint64(funcID(s.Allowed))), mix(seed, uint64(funcID(s.Unit))))
	d.list = append(d.list[:0], s.Jobs...)
	d.active = append(d.active[:0], s.active...)
	for _, j := range s.Jobs {
		d.sums = j.sums(d.sums)
	}
	for i := range s.GPUs {
		g := &s.GPUs[i]
		h := hashIDs(mix(seed, math.Float64bits(g.MemGiB)), g.Jobs)
		d.sums = append(d.sums, h)
	}
	for i := range s.Servers {
		v := &s.Servers[i]
		h := mix(seed, v.Free)
		h = mix(h, b2u(v.Up)<<1|b2u(v.Drained))
		h = hashString(h, v.Reason)
		d.sums = append(d.sums, mix(h, math.Float64bits(v.SuspendedGiB)))
	}
}

// Diff names the first part of the snapshot where after differs from d
// ("job 3 (name) field Reason", "the state of server 2"), or returns ""
// when they are the same. s is the snapshot after, for names.
func (d *Digest) Diff(after *Digest, s *Snapshot) string {
	for i := range digestHead {
		if i >= len(d.sums) || i >= len(after.sums) {
			break
		}
		if d.sums[i] != after.sums[i] {
			return digestHead[i]
		}
	}
	if !slices.Equal(d.list, after.list) {
		return "the job list"
	}
	if !slices.Equal(d.active, after.active) {
		return "the active list"
	}
	if len(d.sums) != len(after.sums) {
		return "the GPU or server list"
	}
	nf := len(jobFieldNames)
	for i := len(digestHead); i < len(d.sums); i++ {
		if d.sums[i] == after.sums[i] {
			continue
		}
		k := i - len(digestHead)
		if k < d.jobs*nf {
			j, f := k/nf, k%nf
			name := ""
			if j < len(s.Jobs) && s.Jobs[j] != nil && s.Jobs[j].Spec != nil {
				name = " (" + s.Jobs[j].Spec.Name + ")"
			}
			return fmt.Sprintf("job %d%s field %s", j, name, jobFieldNames[f])
		}
		k -= d.jobs * nf
		if k < d.gpus {
			return fmt.Sprintf("the state of GPU %d", k)
		}
		return fmt.Sprintf("the state of server %d", k-d.gpus)
	}
	return ""
}

// sums appends one sum per field of j, in jobFieldNames' order.
func (j *Job) sums(dst []uint64) []uint64 {
	f := func(x float64) uint64 { return mix(seed, math.Float64bits(x)) }
	i := func(x int) uint64 { return mix(seed, uint64(x)) }
	return append(dst,
		i(int(j.ID)), hashSpec(seed, j.Spec), i(int(j.State)), hashGPUs(seed, j.GPUs), hashGPUs(seed, j.Last), i(int(j.Home)),
		mix(seed, b2u(j.Shared)), f(j.attained), f(j.attainedAt), f(j.executed),
		f(j.Done), f(j.DoneAt), hashProfile(&j.Profile), f(j.Metric), f(j.MetricAt), f(j.Submitted), f(j.FirstStart),
		f(j.QueuedAt), f(j.Ended), f(j.NotBefore),
		i(j.Starts), i(j.Suspends), i(j.Resumes), i(j.Migrations), i(j.Resizes), i(j.Packs), i(j.Attempts), i(j.UserErrors),
		hashString(seed, j.Reason), mix(seed, j.Seq), i(int(j.PreRun)), mix(seed, b2u(j.Probe)), i(int(j.Parent)),
		mix(seed, b2u(j.StartingUp)), f(j.ProcStart), f(j.ReadyAt), f(j.StartUp), f(j.StartUpEst), mix(seed, b2u(j.Warmed)), mix(seed, b2u(j.PreRunHere)),
		mix(seed, b2u(j.Saved)), f(j.SavedAt))
}

const (
	seed  uint64 = 14695981039346656037 // FNV-1a's offset basis
	prime uint64 = 1099511628211        // and its prime
)

// mix folds one word into h, as FNV-1a folds a byte. For a fixed h it is
// one-to-one in x, and every later step is one-to-one in h, so a change to
// one word always changes the sum it is part of.
func mix(h, x uint64) uint64 { return (h ^ x) * prime }

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func hashString(h uint64, s string) uint64 {
	h = mix(h, uint64(len(s)))
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * prime
	}
	return h
}

func hashFloats(h uint64, xs []float64) uint64 {
	h = mix(h, uint64(len(xs)))
	for _, x := range xs {
		h = mix(h, math.Float64bits(x))
	}
	return h
}

func hashGPUs(h uint64, gs []GPUID) uint64 {
	h = mix(h, uint64(len(gs)))
	for _, g := range gs {
		h = mix(h, uint64(g))
	}
	return h
}

func hashIDs(h uint64, ids []JobID) uint64 {
	h = mix(h, uint64(len(ids)))
	for _, id := range ids {
		h = mix(h, uint64(id))
	}
	return h
}

func hashSpec(h uint64, s *JobSpec) uint64 {
	if s == nil {
		return mix(h, 0)
	}
	h = hashString(hashString(hashString(hashString(h, s.Name), s.User), s.Group), s.VC)
	h = mix(mix(mix(h, uint64(s.GPUs)), uint64(s.MinGPUs)), uint64(s.MaxGPUs))
	h = hashString(mix(h, math.Float64bits(s.Submit)), s.Model)
	h = mix(mix(mix(h, math.Float64bits(s.Iters)), math.Float64bits(s.IterTime)), math.Float64bits(s.MemGiB))
	return hashString(mix(mix(h, math.Float64bits(s.Skew)), uint64(s.Priority)), s.Family)
}

func hashProfile(p *Profile) uint64 {
	h := mix(seed, uint64(len(p.Samples)))
	for i := range p.Samples {
		s := &p.Samples[i]
		h = mix(mix(mix(h, math.Float64bits(s.At)), math.Float64bits(s.Done)), math.Float64bits(s.IterTime))
		h = mix(mix(mix(mix(h, uint64(s.Type)), uint64(s.Width)), uint64(s.Servers)), b2u(s.Shared))
		h = hashIDs(h, s.Neighbors)
	}
	return hashFloats(h, p.Solo)
}

func hashEvent(h uint64, e *Event) uint64 {
	h = mix(mix(mix(mix(h, math.Float64bits(e.Time)), uint64(e.Kind)), uint64(e.Job)), uint64(e.Node))
	h = hashSpec(h, e.Spec)
	h = mix(mix(mix(h, math.Float64bits(e.Done)), math.Float64bits(e.IterTime)), math.Float64bits(e.Metric))
	h = mix(mix(h, b2u(e.HasMetric)<<1|b2u(e.UserError)|b2u(e.NoClient)<<2|b2u(e.Saved)<<3), math.Float64bits(e.StartUp))
	h = mix(h, math.Float64bits(e.SavedAt))
	return hashString(hashString(hashString(h, e.Reason), e.Key), e.Value)
}

func hashRejections(rs []Rejection) uint64 {
	h := mix(seed, uint64(len(rs)))
	for i := range rs {
		a := &rs[i].Action
		h = mix(mix(mix(h, uint64(a.Kind)), uint64(a.Job)), b2u(a.Share)|b2u(a.Unaligned)<<1|b2u(a.Fail)<<2)
		h = hashString(hashGPUs(h, a.GPUs), a.Reason)
		h = hashString(mix(h, uint64(rs[i].Code)), rs[i].Reason)
	}
	return h
}

func hashCluster(c *Cluster) uint64 {
	if c == nil {
		return mix(seed, 0)
	}
	h := hashString(seed, c.Name)
	h = mix(h, uint64(len(c.Types)))
	for _, t := range c.Types {
		h = mix(mix(hashString(h, t.Name), math.Float64bits(t.Speed)), math.Float64bits(t.MemGiB))
	}
	h = mix(h, uint64(len(c.Servers)))
	for i := range c.Servers {
		s := &c.Servers[i]
		h = hashString(mix(h, uint64(s.ID)), s.Name)
		h = mix(mix(mix(mix(h, uint64(s.Rack)), uint64(s.Domain)), uint64(s.Type)), uint64(s.NumGPUs))
		h = mix(mix(mix(h, uint64(s.FirstGPU)), math.Float64bits(s.HostMemGiB)), uint64(s.CPUs))
	}
	h = mix(h, uint64(len(c.Racks)))
	for _, r := range c.Racks {
		h = hashString(h, r)
	}
	h = mix(h, uint64(len(c.Domains)))
	for _, d := range c.Domains {
		h = mix(h, uint64(len(d)))
		for _, s := range d {
			h = mix(h, uint64(s))
		}
	}
	h = mix(h, uint64(len(c.gpuServer)))
	for _, s := range c.gpuServer {
		h = mix(h, uint64(s))
	}
	return h
}

func hashFree(x *FreeIndex) uint64 {
	if x == nil {
		return mix(seed, 0)
	}
	h := seed
	for _, words := range x.byCount {
		h = mix(h, uint64(len(words)))
		for _, w := range words {
			h = mix(h, w)
		}
	}
	h = mix(mix(mix(h, uint64(x.top)), uint64(x.total)), uint64(x.maxSize))
	h = mix(h, uint64(len(x.count)))
	for _, c := range x.count {
		h = mix(h, uint64(c))
	}
	return h
}
