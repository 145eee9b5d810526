package trace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/model"
)

// gavelFields names the fields of each Gavel trace layout, by number of
// tab-separated fields. Gavel's scheduler/utils.py parse_trace reads 10;
// its earlier versions wrote 9 (no working_directory) and 7 (arrival_time
// before scale_factor, where scale_factor 0 means "skip the job"); forks
// add mode after scale_factor (11).
var gavelFields = map[int][]string{
	7:  {"job_type", "command", "num_steps_arg", "needs_data_dir", "total_steps", "arrival_time", "scale_factor"},
	9:  {"job_type", "command", "num_steps_arg", "needs_data_dir", "total_steps", "scale_factor", "priority_weight", "SLO", "arrival_time"},
	10: {"job_type", "command", "working_directory", "num_steps_arg", "needs_data_dir", "total_steps", "scale_factor", "priority_weight", "SLO", "arrival_time"},
	11: {"job_type", "command", "working_directory", "num_steps_arg", "needs_data_dir", "total_steps", "scale_factor", "mode", "priority_weight", "SLO", "arrival_time"},
}

// readGavel reads a Gavel .trace: one job per line, tab-separated, no
// header. Job k (0-based, in file order, as Gavel numbers them) is named
// "gavel-k", of user "default". Its job type maps to a catalog model by
// model.GavelName; IterTime is that model's V100 time per step at scale 1
// and Iters = total_steps / scale_factor, because Gavel counts the steps
// of all the job's workers (its throughputs at scale s are steps/s summed
// over s GPUs). priority_weight, SLO and the command are not used.
func readGavel(r io.Reader, b *builder) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	job := 0
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		f := strings.Split(text, "\t")
		names, ok := gavelFields[len(f)]
		if !ok {
			return lineErr(b.name, line, "", fmt.Errorf("want 10 tab-separated fields (or 7, 9, 11), got %d", len(f)))
		}
		get := func(field string) string { return strings.TrimSpace(f[slices.Index(names, field)]) }
		fail := func(field string, err error) error { return lineErr(b.name, line, field, err) }
		s := &cluster.JobSpec{Name: "gavel-" + strconv.Itoa(job), User: "default"}
		job++
		jobType := get("job_type")
		if jobType == "" {
			return fail("job_type", errors.New("empty job type"))
		}
		steps, err := number(get("total_steps"))
		if err != nil {
			return fail("total_steps", err)
		}
		scale, err := strconv.Atoi(get("scale_factor"))
		if err == nil && (scale < 0 || scale == 0 && len(f) != 7) {
			err = fmt.Errorf("must be positive, got %d", scale)
		}
		if err != nil {
			return fail("scale_factor", err)
		}
		if s.Submit, err = number(get("arrival_time")); err != nil {
			return fail("arrival_time", err)
		}
		name, _, _ := model.GavelName(jobType)
		m := b.cat.Get(name)
		switch {
		case scale == 0:
			b.w.skip("scale factor 0")
			continue
		case steps == 0:
			b.w.skip("zero steps")
			continue
		case m == nil || m.IterTime[cluster.ReferenceGPU] <= 0:
			b.w.skip("job type not in the catalog")
			continue
		}
		s.GPUs, s.Model, s.MemGiB = scale, m.Name, m.MemGiB
		it := m.IterTime[cluster.ReferenceGPU]
		if s.Iters, s.IterTime, err = work(steps/float64(scale)*it, 0, it); err != nil {
			return fail("total_steps", err)
		}
		b.add(s, "")
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", b.name, err)
	}
	return nil
}
