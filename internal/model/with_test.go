package model

import "testing"

func TestWith(t *testing.T) {
	base := Default()
	r := base.Get("resnet50")
	slow := &Model{Name: "resnet50-slowk80", IterTime: map[string]float64{"K80": 2 * r.IterTime["K80"], "V100": r.IterTime["V100"]}, Proxy: r.Proxy}
	c := base.With(slow)
	if got := c.Get("resnet50-slowk80"); got != slow {
		t.Fatalf("added model not found: %v", got)
	}
	if base.Get("resnet50-slowk80") != nil {
		t.Fatal("With modified the receiver")
	}
	if c.Get("resnet50") != r {
		t.Fatal("existing models not shared")
	}
	if s, _ := c.Get("resnet50-slowk80").SpeedOn("K80", "V100"); s >= 1/5.14 {
		t.Errorf("slowed model's K80 speed %v, want half of resnet50's", s)
	}
	if _, _, ok := c.Colocated(slow, r, "V100"); !ok {
		t.Error("co-location data not shared")
	}
}
