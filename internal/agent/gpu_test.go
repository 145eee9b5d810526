package agent

import (
	"strings"
	"testing"
)

func TestParseFakeGPUs(t *testing.T) {
	g, err := ParseFakeGPUs("4xV100")
	if err != nil || len(g) != 4 || g[3].Index != 3 || g[0].Type != "V100" || g[0].MemGiB != 16 {
		t.Fatalf("4xV100: %+v %v", g, err)
	}
	g, err = ParseFakeGPUs("2xL4:24")
	if err != nil || len(g) != 2 || g[1].Type != "L4" || g[1].MemGiB != 24 {
		t.Fatalf("2xL4:24: %+v %v", g, err)
	}
	for _, bad := range []string{"", "4", "x", "0xV100", "65xV100", "2xL4", "2xL4:-1", "ax V100"} {
		if _, err := ParseFakeGPUs(bad); err == nil {
			t.Errorf("ParseFakeGPUs(%q) accepted", bad)
		}
	}
}

// TestParseNvidiaSMI reads nvidia-smi's CSV as it prints it on real machines.
func TestParseNvidiaSMI(t *testing.T) {
	out := `0, NVIDIA H100 80GB HBM3, 81559, GPU-5f8b1c2e-0000-0000-0000-000000000000
1, NVIDIA H100 80GB HBM3, 81559, GPU-5f8b1c2e-0000-0000-0000-000000000001
`
	g, err := parseNvidiaSMI(out)
	if err != nil || len(g) != 2 || g[1].Type != "H100" || g[0].MemGiB < 79 || g[0].MemGiB > 80 || !strings.HasPrefix(g[1].UUID, "GPU-") {
		t.Fatalf("%+v %v", g, err)
	}
	for name, want := range map[string]string{"Tesla V100-SXM2-16GB": "V100", "NVIDIA A100-SXM4-40GB": "A100",
		"Tesla K80": "K80", "NVIDIA GeForce RTX 4090": "RTX-4090", "NVIDIA L4": "L4"} {
		if got := gpuType(name); got != want {
			t.Errorf("gpuType(%q) = %q, want %q", name, got, want)
		}
	}
	for _, bad := range []string{"0, x, 1", "a, V100, 1, u", "1, V100, 16000, u\n", "0, V100, lots, u"} {
		if _, err := parseNvidiaSMI(bad); err == nil {
			t.Errorf("parseNvidiaSMI(%q) accepted", bad)
		}
	}
}
