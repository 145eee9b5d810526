package trace

import (
	"math"
	"reflect"
	"slices"
	"testing"
)

func TestSyntheticDeterministic(t *testing.T) {
	c := SynthConfig{Jobs: 500, Seed: 42, Users: 12, Load: 48}
	a, b := Synthetic(c), Synthetic(c)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same config, different jobs")
	}
	c.Seed = 43
	if reflect.DeepEqual(a, Synthetic(c)) {
		t.Fatal("different seeds, same jobs")
	}
	checkContract(t, a)
}

func TestSyntheticShape(t *testing.T) {
	const n = 20000
	specs := Synthetic(SynthConfig{Jobs: n, Seed: 1, Users: 20, Load: 100})
	checkContract(t, specs)
	work, ones, users := 0.0, 0, map[string]int{}
	durs := make([]float64, 0, n)
	for _, s := range specs {
		work += float64(s.GPUs) * s.Duration()
		if s.GPUs == 1 {
			ones++
		}
		users[s.User]++
		durs = append(durs, s.Duration())
	}
	if load := work / specs[n-1].Submit; math.Abs(load-100) > 1e-6 {
		t.Errorf("offered load %v, want 100", load)
	}
	// Philly: 76,627 of 82,247 jobs (93.2%) use one GPU; median run time 1,144 s.
	if f := float64(ones) / n; math.Abs(f-0.932) > 0.01 {
		t.Errorf("1-GPU share %.3f, want ≈ 0.932", f)
	}
	slices.Sort(durs)
	if med := durs[n/2]; med < 1000 || med > 1300 {
		t.Errorf("median duration %v, want ≈ 1144", med)
	}
	if len(users) != 20 || users["user-01"] < 2*users["user-02"]*9/10 || users["user-01"] < users["user-20"]*15 {
		t.Errorf("users not Zipf-like: %v", users)
	}
}

func TestSyntheticOptions(t *testing.T) {
	specs := Synthetic(SynthConfig{Jobs: 300, Seed: 7, MaxGPUs: 4, MaxDuration: 600, Models: []string{"vae", "nope"}})
	checkContract(t, specs)
	for _, s := range specs {
		if s.GPUs > 4 || s.Duration() > 600*(1+1e-12) || s.Model != "vae" || s.User == "" {
			t.Fatalf("%+v", *s)
		}
	}
	specs = Synthetic(SynthConfig{Jobs: 50, Seed: 7, GPUs: []int{2, 0, 8}})
	for _, s := range specs {
		if s.GPUs != 2 && s.GPUs != 8 {
			t.Fatalf("gpus %d", s.GPUs)
		}
	}
	if one := Synthetic(SynthConfig{Jobs: 1}); len(one) != 1 || one[0].Submit != 0 {
		t.Errorf("one job: %+v", one)
	}
	if Synthetic(SynthConfig{}) != nil {
		t.Error("zero jobs")
	}
	for _, u := range []float64{0, 0.003, 0.5, 0.99995, 0.9999999} {
		if d := phillyDuration(u); !(d >= 1 && d <= 4628226) {
			t.Errorf("phillyDuration(%v) = %v", u, d)
		}
	}
}
