package cluster_test

import (
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

func TestParseYAML(t *testing.T) {
	cases := []struct {
		name, in, err string
		gpus          int
	}{
		{"hetero", "servers:\n  - {type: V100, count: 3, gpus: 4}\n  - {type: k80, count: 2, gpus: 8, domain: 1}\n", "", 28},
		{"custom type", "gpu_types:\n  - {name: B200, speed: 9, mem_gib: 192}\nservers:\n  - {type: B200, count: 1, gpus: 8}\n", "", 8},
		{"typo", "servers:\n  - {typ: V100, count: 1, gpus: 4}\n", "field typ not found", 0},
		{"unknown type", "servers:\n  - {type: X9, count: 1, gpus: 4}\n", `servers[0]: unknown GPU type "X9"`, 0},
		{"zero count", "servers:\n  - {type: V100, count: 0, gpus: 4}\n", "servers[0]: server group of type V100: count must be positive", 0},
		{"too many gpus", "servers:\n  - {type: V100, count: 1, gpus: 65}\n", "gpus per server must be in 1..64", 0},
		{"empty", "", "empty cluster spec", 0},
		{"no servers", "name: x\n", "at least one server group", 0},
		{"bad type speed", "gpu_types:\n  - {name: Z, speed: 0, mem_gib: 1}\nservers:\n  - {type: Z, count: 1, gpus: 1}\n", "gpu_types[0] (Z): speed must be positive", 0},
	}
	for _, tc := range cases {
		c, err := cluster.ParseYAML(strings.NewReader(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if c.NumGPUs() != tc.gpus {
			t.Errorf("%s: %d GPUs, want %d", tc.name, c.NumGPUs(), tc.gpus)
		}
	}
}

func TestTiresiasCSVAndPresets(t *testing.T) {
	c, err := cluster.ParseTiresiasCSV("n4g4", strings.NewReader("num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n1,4,4,40,256"))
	if err != nil || c.NumGPUs() != 16 || len(c.Servers) != 4 || len(c.Domains) != 1 {
		t.Fatalf("n4g4: %v, %v", c, err)
	}
	if _, err := cluster.ParseTiresiasCSV("x", strings.NewReader("num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n1,x,4,40,256")); err == nil || !strings.Contains(err.Error(), "line 2, field num_node_p_switch") {
		t.Errorf("bad field: %v", err)
	}
	want := map[string]int{"philly": 2816, "gandiva-180": 180, "fair-hetero": 164, "big-8000": 8000, "philly-sample": 64}
	for name, gpus := range want {
		c, err := cluster.Load(name)
		if err != nil || c.NumGPUs() != gpus {
			t.Errorf("preset %s: %v GPUs, err %v; want %d", name, c.NumGPUs(), err, gpus)
		}
	}
	if _, err := cluster.Load("no-such-thing"); err == nil || !strings.Contains(err.Error(), "no such file and no such preset") {
		t.Errorf("missing preset: %v", err)
	}
}

func FuzzParseYAML(f *testing.F) {
	f.Add("servers:\n  - {type: V100, count: 3, gpus: 4}\n")
	f.Add("gpu_types:\n  - {name: B, speed: 2, mem_gib: 8}\nservers:\n  - {type: B, count: 1, gpus: 64, domain: 3}\n")
	f.Fuzz(func(t *testing.T, in string) {
		c, err := cluster.ParseYAML(strings.NewReader(in))
		if err != nil {
			return
		}
		if c.NumGPUs() <= 0 || len(c.Servers) == 0 {
			t.Fatalf("accepted an empty cluster")
		}
		for _, s := range c.Servers {
			if s.NumGPUs < 1 || s.NumGPUs > cluster.MaxGPUsPerServer || c.Types[s.Type].Speed <= 0 {
				t.Fatalf("accepted a bad server %+v", s)
			}
		}
	})
}

func FuzzParseTiresiasCSV(f *testing.F) {
	f.Add("num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n1,4,4,40,256")
	f.Fuzz(func(t *testing.T, in string) {
		c, err := cluster.ParseTiresiasCSV("f", strings.NewReader(in))
		if err == nil && c.NumGPUs() <= 0 {
			t.Fatalf("accepted an empty cluster")
		}
	})
}
