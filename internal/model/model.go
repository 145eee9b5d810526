// Package model is the catalog of model profiles: how fast a model trains on
// each GPU generation, how much GPU memory it needs, how skewed its tensor
// sizes are (which decides how much it suffers when spread over servers), and
// how fast it trains next to another model on one GPU.
//
// The data come from the embedded public data sets (package dataset) and the
// papers (docs/PAPERS.md); every figure names its source in Model.Source. The simulator's
// performance model reads the catalog; policies never do (they read profiles
// measured at run time).
package model

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gandiva-sched/gandiva/internal/dataset"
)

// Model is one model type's profile.
type Model struct {
	Name string
	// IterTime maps a GPU type name to measured seconds per mini-batch on one
	// such GPU, alone. Types missing here fall back on GPUType.Speed.
	IterTime map[string]float64
	// MemGiB is the peak GPU memory per GPU during a mini-batch.
	MemGiB float64
	// BoundaryGiB is the GPU memory at a mini-batch boundary: what a
	// suspend must copy to host memory.
	BoundaryGiB float64
	// SizeMB is the total size of the model's tensors (parameters).
	SizeMB float64
	// Skew is the share of the largest tensor in SizeMB, in [0, 1].
	Skew float64
	// Proxy is the Gavel job type whose co-location measurements stand for
	// this model when it shares a GPU.
	Proxy  string
	Source string
}

// SpeedOn returns the model's speed on GPU type name relative to the
// reference GPU, or ok=false when it has no measurement for both types.
func (m *Model) SpeedOn(name, reference string) (float64, bool) {
	t, ok1 := m.IterTime[name]
	r, ok2 := m.IterTime[reference]
	if !ok1 || !ok2 || t <= 0 || r <= 0 {
		return 0, false
	}
	return r / t, true
}

// Catalog holds the model profiles and Gavel's co-location table.
type Catalog struct {
	models map[string]*Model
	// pairs[gpuType][a][b] = (a's steps/s, b's steps/s) when a and b share one GPU.
	pairs map[string]map[string]map[string][2]float64
	// alone[gpuType][a] = a's steps/s alone on one GPU.
	alone map[string]map[string]float64
}

var (
	defaultOnce sync.Once
	defaultCat  *Catalog
	defaultErr  error
)

// Default returns the catalog built from the embedded data sets. It is built
// once and shared; callers must not modify it.
func Default() *Catalog {
	defaultOnce.Do(func() { defaultCat, defaultErr = build() })
	if defaultErr != nil {
		// The embedded data are part of the binary; failing here is a build defect.
		panic(fmt.Sprintf("model catalog: %v", defaultErr))
	}
	return defaultCat
}

// Get returns a model by name (case-insensitive), or nil.
func (c *Catalog) Get(name string) *Model {
	if m, ok := c.models[name]; ok {
		return m
	}
	return c.models[strings.ToLower(name)]
}

// Names returns all model names, sorted.
func (c *Catalog) Names() []string {
	out := make([]string, 0, len(c.models))
	for n := range c.models {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Colocated returns the fractions of their solo speed that models a and b
// keep when they share one GPU of type gpuType, from Gavel's measurements of
// their proxies (on an H100, ours where we measured the pair; a type
// without the pair uses the nearest one Gavel measured). ok is false when there is no measurement; fa = fb = 0 means
// the pair does not fit in memory together.
func (c *Catalog) Colocated(a, b *Model, gpuType string) (fa, fb float64, ok bool) {
	if a == nil || b == nil || a.Proxy == "" || b.Proxy == "" {
		return 0, 0, false
	}
	t := strings.ToLower(gpuType)
	if _, has := c.pairs[t][a.Proxy][b.Proxy]; !has {
		t = nearestGavelType(gpuType)
	}
	pa, ok1 := c.pairs[t][a.Proxy][b.Proxy]
	sa, ok2 := c.alone[t][a.Proxy]
	sb, ok3 := c.alone[t][b.Proxy]
	if !ok1 || !ok2 || !ok3 || sa <= 0 || sb <= 0 {
		return 0, 0, false
	}
	return pa[0] / sa, pa[1] / sb, true
}

// h100Proxy is the job type packed on the H100 (our measurement).
const h100Proxy = "ResNet-50 (batch size 64)"

// addH100 adds our own packing measurement on one NVIDIA H100 80GB HBM3
// (docs/measurements/h100-2026-11-24.md, section 2): ResNet-50 at
// batch 64 runs 26.0 mini-batches/s alone, and 12.5 and 11.9 when two share
// the GPU (0.94 of alone together; three: 0.95, four: 0.99). Other pairs on
// an H100 fall back on Gavel's V100 measurements (Colocated).
func (c *Catalog) addH100() {
	c.pairs["h100"] = map[string]map[string][2]float64{h100Proxy: {h100Proxy: {12.5, 11.9}}}
	c.alone["h100"] = map[string]float64{h100Proxy: 26.0}
}

// nearestGavelType maps GPU generations Gavel did not measure to one it did.
func nearestGavelType(t string) string {
	switch strings.ToUpper(t) {
	case "K80":
		return "k80"
	case "P40", "P100":
		return "p100"
	default:
		return "v100"
	}
}

// seedTable is the Gandiva_fair paper's table (EuroSys'20): mini-batch time on K80 in
// ms and the speed-ups K80→P40, K80→P100, K80→V100.
var seedTable = []struct {
	name             string
	k80ms            float64
	p40, p100, v100  float64
	memGiB, boundGiB float64
	proxy            string
}{
	{"vae", 11.5, 1.17, 1.19, 1.25, 1.5, 0.1, "ResNet-18 (batch size 16)"},
	{"superresolution", 207.5, 1.43, 1.73, 1.87, 2.5, 0.1, "ResNet-18 (batch size 16)"},
	{"dcgan", 183.4, 4.34, 4.31, 6.42, 4, 0.2, "CycleGAN"},
	{"gru", 48.4, 3.00, 2.58, 4.81, 3, 0.1, "LM (batch size 20)"},
	{"lstm", 48.9, 3.10, 3.58, 4.81, 3, 0.1, "LM (batch size 20)"},
	{"resnet50", 134, 3.17, 3.34, 5.14, 23, 0.3, "ResNet-50 (batch size 64)"},
	{"resnext50", 2005.7, 3.70, 4.12, 6.33, 14, 0.4, "ResNet-50 (batch size 128)"},
}

// tiresiasMem gives peak GPU memory (GiB) and the Gavel proxy for the
// Tiresias trace's models, which have tensor sizes but no throughputs.
// Memory figures are estimates for ImageNet-sized inputs at batch 64 on one
// GPU (framework memory profilers' typical readings); they matter only to
// decide which jobs may share a GPU.
var tiresiasMem = map[string]struct {
	mem   float64
	proxy string
}{
	"vgg19": {14, "ResNet-50 (batch size 64)"}, "vgg16": {13, "ResNet-50 (batch size 64)"},
	"vgg11": {11, "ResNet-50 (batch size 64)"}, "alexnet": {4, "ResNet-18 (batch size 64)"},
	"resnet152": {15, "ResNet-50 (batch size 64)"}, "resnet101": {12, "ResNet-50 (batch size 64)"},
	"resnet50": {23, "ResNet-50 (batch size 64)"}, "inception4": {12, "ResNet-50 (batch size 64)"},
	"inception3": {9, "ResNet-50 (batch size 32)"}, "googlenet": {6, "ResNet-18 (batch size 64)"},
}

// gavelMem estimates peak GPU memory (GiB) of Gavel's job types by family
// and batch size: Gavel lists only throughputs; a pair it could not run
// together (throughput 0) is what memory forbids, and the simulator honours
// those zeros directly.
func gavelMem(family string, batch int) float64 {
	b := float64(batch)
	switch family {
	case "resnet18":
		return 1 + b/32
	case "resnet50":
		return 2 + b/8
	case "transformer":
		return 2 + b/16
	case "lm":
		return 1 + b/10
	case "recommendation":
		return 1 + b/1024
	case "cyclegan":
		return 6
	case "a3c":
		return 1
	}
	return 4
}

func build() (*Catalog, error) {
	c := &Catalog{models: map[string]*Model{}, pairs: map[string]map[string]map[string][2]float64{}, alone: map[string]map[string]float64{}}
	if err := c.loadGavel(); err != nil {
		return nil, err
	}
	c.addH100()
	tensors, err := loadTensors()
	if err != nil {
		return nil, err
	}
	for _, r := range seedTable {
		k80 := r.k80ms / 1000
		m := &Model{Name: r.name, MemGiB: r.memGiB, BoundaryGiB: r.boundGiB, Proxy: r.proxy,
			IterTime: map[string]float64{"K80": k80, "P40": k80 / r.p40, "P100": k80 / r.p100, "V100": k80 / r.v100},
			Source:   "mini-batch times: Gandiva_fair EuroSys'20 table; memory: estimate (resnet50 peak 23 GB at batch 128, boundary 0.3 GB: Gandiva OSDI'18)"}
		c.models[r.name] = m
	}
	for name, ts := range tensors {
		m := c.models[name]
		if m == nil {
			info := tiresiasMem[name]
			if info.mem == 0 {
				info.mem, info.proxy = 8, "ResNet-50 (batch size 64)"
			}
			m = &Model{Name: name, MemGiB: info.mem, BoundaryGiB: 0.3, Proxy: info.proxy,
				Source: "tensor sizes: Tiresias model_tensors.csv; memory: estimate; speed: generic GPU type speeds"}
			c.models[name] = m
		}
		total, largest := 0.0, 0.0
		for _, t := range ts {
			total += t
			largest = math.Max(largest, t)
		}
		m.SizeMB = total
		if total > 0 {
			m.Skew = largest / total
		}
	}
	return c, nil
}

func loadTensors() (map[string][]float64, error) {
	data, err := dataset.ReadFile("model_tensors.csv")
	if err != nil {
		return nil, err
	}
	recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("model_tensors.csv: %w", err)
	}
	out := map[string][]float64{}
	for i, r := range recs[1:] {
		if len(r) < 2 {
			return nil, fmt.Errorf("model_tensors.csv line %d: want 2 fields", i+2)
		}
		var ts []float64
		for _, f := range strings.Fields(r[1]) {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				return nil, fmt.Errorf("model_tensors.csv line %d: %w", i+2, err)
			}
			ts = append(ts, v)
		}
		out[strings.ToLower(strings.TrimSpace(r[0]))] = ts
	}
	return out, nil
}

// GavelName turns "ResNet-50 (batch size 64)" into "resnet50-b64" and
// "A3C" into "a3c": the catalog name of a Gavel job type.
func GavelName(jobType string) (name, family string, batch int) {
	base, rest, hasBatch := strings.Cut(jobType, " (batch size ")
	family = strings.ToLower(strings.ReplaceAll(base, "-", ""))
	if hasBatch {
		batch, _ = strconv.Atoi(strings.TrimSuffix(rest, ")"))
		return fmt.Sprintf("%s-b%d", family, batch), family, batch
	}
	return family, family, 0
}

// parseGavelKey parses "('ResNet-50 (batch size 64)', 1)".
func parseGavelKey(k string) (jobType string, scale int, ok bool) {
	k = strings.TrimSpace(k)
	if !strings.HasPrefix(k, "('") || !strings.HasSuffix(k, ")") {
		return "", 0, false
	}
	i := strings.LastIndex(k, "',")
	if i < 0 {
		return "", 0, false
	}
	jobType = k[2:i]
	s, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(k[i+2:], ")")))
	if err != nil {
		return "", 0, false
	}
	return jobType, s, true
}

func (c *Catalog) loadGavel() error {
	data, err := dataset.ReadFile("gavel_throughputs.json")
	if err != nil {
		return err
	}
	var raw map[string]map[string]map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("gavel throughputs: %w", err)
	}
	gpuNames := map[string]string{"k80": "K80", "p100": "P100", "v100": "V100"}
	for gt, jobs := range raw {
		upper, ok := gpuNames[gt]
		if !ok {
			continue // the *_unconsolidated tables
		}
		c.pairs[gt] = map[string]map[string][2]float64{}
		c.alone[gt] = map[string]float64{}
		for key, entry := range jobs {
			jt, scale, ok := parseGavelKey(key)
			if !ok {
				return fmt.Errorf("gavel throughputs: bad key %q", key)
			}
			if scale != 1 {
				continue
			}
			var alone float64
			if err := json.Unmarshal(entry["null"], &alone); err != nil {
				return fmt.Errorf("gavel throughputs %s %s: %w", gt, key, err)
			}
			c.alone[gt][jt] = alone
			row := map[string][2]float64{}
			for other, v := range entry {
				if other == "null" {
					continue
				}
				ot, oscale, ok := parseGavelKey(other)
				if !ok || oscale != 1 {
					continue
				}
				var pr [2]float64
				if err := json.Unmarshal(v, &pr); err != nil {
					return fmt.Errorf("gavel throughputs %s %s/%s: %w", gt, key, other, err)
				}
				row[ot] = pr
			}
			c.pairs[gt][jt] = row
			name, family, batch := GavelName(jt)
			m := c.models[name]
			if m == nil {
				mem := gavelMem(family, batch)
				m = &Model{Name: name, IterTime: map[string]float64{}, MemGiB: mem, BoundaryGiB: mem / 50, Proxy: jt,
					Source: "throughputs: Gavel simulation_throughputs.json (scale 1); memory: estimate by batch size"}
				c.models[name] = m
			}
			if alone > 0 {
				m.IterTime[upper] = 1 / alone
			}
		}
	}
	return nil
}

// With returns a copy of the catalog with models added or replaced (by
// name), sharing everything else: experiments use it to run job types that
// the data sets do not have, such as a user's jobs deliberately slowed on
// one GPU generation. The receiver is not modified.
func (c *Catalog) With(models ...*Model) *Catalog {
	out := &Catalog{models: make(map[string]*Model, len(c.models)+len(models)), pairs: c.pairs, alone: c.alone}
	for k, v := range c.models {
		out.models[k] = v
	}
	for _, m := range models {
		out.models[m.Name] = m
	}
	return out
}
