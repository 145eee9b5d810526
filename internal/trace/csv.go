package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// table is a CSV file whose columns are found by header name.
type table struct {
	*csv.Reader
	file string
	col  map[string]int // column name -> index
	head []string
	rec  []string
}

// openTable reads the header and checks that the required columns exist.
func openTable(r io.Reader, file string, required ...string) (*table, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err == io.EOF {
		return nil, lineErr(file, 1, "", errors.New("empty trace: no header line"))
	}
	if err != nil {
		return nil, csvErr(file, err)
	}
	t := &table{Reader: cr, file: file, col: map[string]int{}}
	for i, h := range head {
		h = normCol(h)
		t.head = append(t.head, h)
		if _, ok := t.col[h]; !ok {
			t.col[h] = i
		}
	}
	for _, c := range required {
		if _, ok := t.col[c]; !ok {
			return nil, lineErr(file, 1, c, fmt.Errorf("missing column (header has %s)", strings.Join(t.head, ",")))
		}
	}
	return t, nil
}

// next reads a record; ok is false at the end of the file.
func (t *table) next() (ok bool, err error) {
	t.rec, err = t.Read()
	if err == io.EOF {
		return false, nil
	}
	if err != nil {
		return false, csvErr(t.file, err)
	}
	return true, nil
}

// get returns the trimmed value of column c, "" when the column is absent.
func (t *table) get(c string) string {
	if i, ok := t.col[c]; ok {
		return strings.TrimSpace(t.rec[i])
	}
	return ""
}

func (t *table) has(c string) bool { _, ok := t.col[c]; return ok }

// fail reports a bad value in column c of the current record.
func (t *table) fail(c string, err error) error {
	line, _ := t.FieldPos(t.col[c])
	return lineErr(t.file, line, c, err)
}

// line is the line where the current record starts.
func (t *table) line() int { l, _ := t.FieldPos(0); return l }

func csvErr(file string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return lineErr(file, pe.Line, "", pe.Err)
	}
	return fmt.Errorf("%s: %w", file, err)
}

// readTiresias reads the Tiresias simulator's CSV: job_id, num_gpu,
// submit_time, duration (required), iterations, model_name, user, vc
// (optional), in any order; other columns are ignored.
func readTiresias(r io.Reader, b *builder) error {
	t, err := openTable(r, b.name, "job_id", "num_gpu", "submit_time", "duration")
	if err != nil {
		return err
	}
	for row := 1; ; row++ {
		if ok, err := t.next(); !ok {
			return err
		}
		s := &cluster.JobSpec{Name: t.get("job_id"), User: t.get("user"), VC: t.get("vc")}
		if s.Name == "" {
			return t.fail("job_id", errors.New("empty job id"))
		}
		if prev, ok := b.dup(s.Name, "line "+strconv.Itoa(t.line())); ok {
			return t.fail("job_id", fmt.Errorf("duplicate job id %q (first on %s)", s.Name, prev))
		}
		if s.User == "" {
			s.User = "default"
		}
		if s.GPUs, err = gpuCount(t.get("num_gpu")); err != nil {
			return t.fail("num_gpu", err)
		}
		if s.Submit, err = number(t.get("submit_time")); err != nil {
			return t.fail("submit_time", err)
		}
		dur, err := number(t.get("duration"))
		if err != nil {
			return t.fail("duration", err)
		}
		iters := 0.0
		if v := t.get("iterations"); v != "" {
			if iters, err = number(v); err != nil {
				return t.fail("iterations", err)
			}
		}
		iterTime := defaultIterTime
		if t.has("model_name") {
			s.Model = strings.ToLower(t.get("model_name"))
			if m := b.cat.Get(s.Model); m != nil {
				s.MemGiB, iterTime = m.MemGiB, v100(m)
			}
		} else {
			c := b.assign(row)
			s.Model, s.MemGiB, iterTime = c.name, c.mem, c.iterTime
		}
		if dur == 0 {
			b.w.skip("zero duration")
			continue
		}
		if s.Iters, s.IterTime, err = work(dur, iters, iterTime); err != nil {
			return t.fail("duration", err)
		}
		b.add(s, "")
	}
}

// readPhillyCSV reads the pre-processed Philly CSV: timestamp, duration,
// num_gpus, cluster (required, any order; gpu_time and others ignored).
// Row n (1-based, header excluded) becomes job "philly-n" of user
// "vc-<cluster>" with a model assigned from (Seed, n).
func readPhillyCSV(r io.Reader, b *builder) error {
	t, err := openTable(r, b.name, "timestamp", "duration", "num_gpus", "cluster")
	if err != nil {
		return err
	}
	iTime, iDur, iGPUs, iVC := t.col["timestamp"], t.col["duration"], t.col["num_gpus"], t.col["cluster"]
	users := map[string][2]string{} // cluster -> {interned VC, user}
	var name []byte
	for row := 1; ; row++ {
		if ok, err := t.next(); !ok {
			return err
		}
		rec := t.rec
		vc := strings.TrimSpace(rec[iVC])
		if vc == "" {
			return t.fail("cluster", errors.New("empty virtual cluster"))
		}
		u, ok := users[vc]
		if !ok {
			u = [2]string{strings.Clone(vc), "vc-" + vc}
			users[vc] = u
		}
		name = strconv.AppendInt(append(name[:0], "philly-"...), int64(row), 10)
		s := b.newSpec()
		s.Name, s.User, s.VC = string(name), u[1], u[0]
		if s.Submit, err = stamp(rec[iTime]); err != nil {
			return t.fail("timestamp", err)
		}
		dur, err := number(rec[iDur])
		if err != nil {
			return t.fail("duration", err)
		}
		if s.GPUs, err = gpuCount(rec[iGPUs]); err != nil {
			return t.fail("num_gpus", err)
		}
		if dur == 0 {
			b.w.skip("zero duration")
			continue
		}
		c := b.assign(row)
		s.Model, s.MemGiB = c.name, c.mem
		if s.Iters, s.IterTime, err = work(dur, 0, c.iterTime); err != nil {
			return t.fail("duration", err)
		}
		b.add(s, "")
	}
}
