package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// phillyJob is one element of Philly's cluster_job_log.
type phillyJob struct {
	Status    string `json:"status"`
	VC        string `json:"vc"`
	JobID     string `json:"jobid"`
	User      string `json:"user"`
	Submitted string `json:"submitted_time"`
	Attempts  []struct {
		Start  *string `json:"start_time"`
		End    *string `json:"end_time"`
		Detail []struct {
			GPUs count `json:"gpus"`
		} `json:"detail"`
	} `json:"attempts"`
}

// readPhillyJSON streams Philly's cluster_job_log: a JSON array of jobs
// (or a sequence of job objects, one per line), decoded one job at a time.
func readPhillyJSON(br *bufio.Reader, b *builder) error {
	skipped := int64(0) // leading white space, which the decoder does not see
	for {
		c, err := br.ReadByte()
		if err == io.EOF {
			return lineErr(b.name, 1, "", errors.New("empty trace"))
		}
		if err != nil {
			return fmt.Errorf("%s: %w", b.name, err)
		}
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			_ = br.UnreadByte()
			break
		}
		skipped++
	}
	dec := json.NewDecoder(br)
	// fail reports an error in job (-1: none) at byte off, the start of
	// the job; a type error's offset is relative to the job's start.
	fail := func(job int, off int64, field string, err error) error {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			off, field = off+te.Offset, te.Field
		}
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return &ParseError{File: b.name, Job: job, Offset: off + skipped, Field: field, Err: err}
	}
	// delim reads the array's opening or closing bracket.
	delim := func() error {
		off := dec.InputOffset()
		_, err := dec.Token()
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off = se.Offset
		}
		if err != nil {
			return fail(-1, off, "", err)
		}
		return nil
	}
	c, _ := br.Peek(1)
	array := c[0] == '['
	if array {
		if err := delim(); err != nil {
			return err
		}
	}
	for i := 0; ; i++ {
		off := dec.InputOffset()
		if array && !dec.More() {
			break
		}
		var j phillyJob
		if err := dec.Decode(&j); err == io.EOF && !array {
			break
		} else if err != nil {
			return fail(i, off, "", err)
		}
		if reason, field, err := phillyJobSpec(b, i, &j); err != nil {
			return fail(i, off, field, err)
		} else if reason != "" {
			b.w.skip(reason)
		}
	}
	if array { // the closing bracket, then nothing
		if err := delim(); err != nil {
			return err
		}
		if _, err := dec.Token(); err != io.EOF {
			return fail(-1, dec.InputOffset(), "", errors.New("data after the job array"))
		}
	}
	return nil
}

// phillyJobSpec turns job i into a spec and adds it, or returns why it was
// skipped (reason) or which field is malformed (field, err).
//
// GPUs is the number of GPUs of the first attempt (summed over its
// servers); the duration is the sum over attempts with both a start and an
// end time of end − start, so the work of failed attempts that a retry
// re-ran is counted too.
func phillyJobSpec(b *builder, i int, j *phillyJob) (reason, field string, err error) {
	if j.JobID == "" {
		return "", "jobid", errors.New("missing job id")
	}
	if prev, ok := b.dup(j.JobID, "job "+strconv.Itoa(i)); ok {
		return "", "jobid", fmt.Errorf("duplicate job id %q (first at %s)", j.JobID, prev)
	}
	s := &cluster.JobSpec{Name: j.JobID, User: j.User, VC: j.VC}
	if s.Submit, err = stamp(j.Submitted); err != nil {
		return "", "submitted_time", err
	}
	dur, complete, backwards := 0.0, 0, false
	for k, a := range j.Attempts {
		if missing(a.Start) || missing(a.End) {
			continue
		}
		t0, err := stamp(*a.Start)
		if err != nil {
			return "", fmt.Sprintf("attempts[%d].start_time", k), err
		}
		t1, err := stamp(*a.End)
		if err != nil {
			return "", fmt.Sprintf("attempts[%d].end_time", k), err
		}
		backwards = backwards || t1 < t0
		dur += t1 - t0
		complete++
	}
	switch {
	case len(j.Attempts) == 0:
		return "no attempts", "", nil
	case complete == 0:
		return "no complete attempt", "", nil
	case backwards:
		return "attempt ends before it starts", "", nil
	}
	for _, d := range j.Attempts[0].Detail {
		s.GPUs += int(d.GPUs)
	}
	switch {
	case s.GPUs == 0:
		return "no GPUs in the first attempt", "", nil
	case dur == 0:
		return "zero duration", "", nil
	}
	if s.User == "" {
		s.User = "vc-" + j.VC
		if j.VC == "" {
			s.User = "default"
		}
	}
	c := b.assign(i)
	s.Model, s.MemGiB = c.name, c.mem
	if s.Iters, s.IterTime, err = work(dur, 0, c.iterTime); err != nil {
		return "", "attempts", err
	}
	status := j.Status
	if status == "" {
		status = "unknown"
	}
	b.add(s, status)
	return "", "", nil
}

// missing reports an absent time: JSON null, "" or Python's "None".
func missing(s *string) bool { return s == nil || *s == "" || *s == "None" }

// count decodes a JSON array (or null) as its number of elements, without
// decoding them: the job log lists GPU names where only their number counts.
type count int

func (c *count) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == "null":
		*c = 0
		return nil
	case len(b) < 2 || b[0] != '[':
		return fmt.Errorf("gpus: want an array, got %.20s", b)
	case len(bytes.TrimSpace(b[1:len(b)-1])) == 0:
		*c = 0
		return nil
	}
	n, depth := 1, 0
	for i := 0; i < len(b); i++ { // b is valid JSON: the decoder checked it
		switch b[i] {
		case '"':
			for i++; b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		case ',':
			if depth == 1 {
				n++
			}
		}
	}
	*c = count(n)
	return nil
}
