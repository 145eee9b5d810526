package trainer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// model is the trainer's whole state: weights and a random generator (the
// "data order"). One mini-batch mixes a fresh random number into every
// weight, so any lost, repeated or reordered mini-batch, and any state not
// restored exactly, changes the final checksum. examples/python/trainer.py
// implements the same arithmetic and must print the same checksum.
type model struct {
	w   []uint64
	rng uint64
}

const (
	golden = 0x9E3779B97F4A7C15
	magic  = 0x67616e6469766131 // "gandiva1"
)

// mix64 is splitmix64's finaliser.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

func newModel(seed uint64, dim int) *model {
	m := &model{w: make([]uint64, dim), rng: seed}
	for i := range m.w {
		m.w[i] = mix64(seed + uint64(i)*golden)
	}
	return m
}

func (m *model) next() uint64 {
	m.rng += golden
	return mix64(m.rng)
}

// step trains mini-batch number k (from 0).
func (m *model) step(k int64) {
	r := m.next() ^ uint64(k)
	for i := range m.w {
		m.w[i] = mix64(m.w[i] ^ (r + uint64(i)))
	}
}

// loss is a number in [0, 1) that changes every mini-batch, reported as the
// job's metric.
func (m *model) loss() float64 { return float64(m.w[0]>>11) / (1 << 53) }

// checksum folds the weights into one number.
func (m *model) checksum() uint64 {
	var h uint64
	for _, w := range m.w {
		h = mix64(h ^ w)
	}
	return h
}

// save writes magic, step, rng, len(w) and w, little-endian.
func (m *model) save(w io.Writer, step int64) error {
	if m.w == nil {
		return errors.New("model state was released")
	}
	buf := make([]byte, 8*(4+len(m.w)))
	binary.LittleEndian.PutUint64(buf[0:], magic)
	binary.LittleEndian.PutUint64(buf[8:], uint64(step))
	binary.LittleEndian.PutUint64(buf[16:], m.rng)
	binary.LittleEndian.PutUint64(buf[24:], uint64(len(m.w)))
	for i, x := range m.w {
		binary.LittleEndian.PutUint64(buf[32+8*i:], x)
	}
	_, err := w.Write(buf)
	return err
}

// load replaces the state with what save wrote and returns its step.
func (m *model) load(r io.Reader) (int64, error) {
	var hdr [32]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, fmt.Errorf("reading header: %w", err)
	}
	if binary.LittleEndian.Uint64(hdr[0:]) != magic {
		return 0, errors.New("not a trainer state")
	}
	step := int64(binary.LittleEndian.Uint64(hdr[8:]))
	rng := binary.LittleEndian.Uint64(hdr[16:])
	n := binary.LittleEndian.Uint64(hdr[24:])
	if n > 1<<30 {
		return 0, fmt.Errorf("state of %d weights is too large", n)
	}
	buf := make([]byte, 8*n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, fmt.Errorf("reading weights: %w", err)
	}
	w := make([]uint64, n)
	for i := range w {
		w[i] = binary.LittleEndian.Uint64(buf[8*i:])
	}
	m.w, m.rng = w, rng
	return step, nil
}
