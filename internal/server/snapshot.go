package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/codec"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/store"
)

// Recovery: snapshots, then the entries after them.
//
// A snapshot is the whole replicated state as of a log entry: the
// machine (jobs' records and histories, idempotency keys, the executor's
// nodes, runs, workers and attempts, the cluster as registered), the
// engine's state (engine.State) and the policy's own state in it. It is
// encoded with package codec, every field of every type, so a field added
// to the machine, the executor, the engine or a policy is in the next
// snapshot with no change here. A restart decodes the newest snapshot
// into a fresh machine and replays only the entries after it; the changes
// those entries produce are compared with the history recorded after the
// snapshot, as a whole replay's are. If the newest snapshot cannot be
// read (a corrupt store, a build that cannot decode it), the one before it
// and the entries after it are used; with neither, the whole log, if the
// store still has it.
//
// The loop takes a snapshot after a batch has committed, when the entries
// since the last one would take a restart more than Config.SnapshotAfter
// to replay (their measured apply time) or number Config.SnapshotEvery,
// but never more often than ten times its own cost. It encodes the state
// on the loop under the read lock (reads are served meanwhile; writes wait
// for the encoding) and writes it, with the compaction of the log, in a
// background transaction (store.SaveSnapshot), which the next commit waits
// for.

// The snapshot format contract.
//
// A snapshot's data is snapshotMagic, a header (its length, uvarint, and
// snapshotHeader as JSON), the length of the machine's encoding (uvarint),
// the machine's encoding and the engine's (both package codec's): two
// parts, so that a restart decodes them at once, on two cores. The
// header's Format is the layout's version (snapshotFormat); its Schema is
// the fingerprint of the schema of every type the parts hold (codec.Schema
// of the machine, the engine's state and the policy: their fields' names,
// kinds and types) and Build the build that wrote it, for messages.
//
// A snapshot is always decoded strictly (codec.Options.Strict): a field
// that the data holds and this build's type lacks is an error, never
// dropped in silence; a field this build added keeps its fresh value. So a
// snapshot of another schema is either read whole or refused, naming the
// field: then recovery tries the older snapshot and then the log (see
// Recovery above), and with neither the server refuses to start, saying
// which build wrote the snapshot. A field renamed or removed on purpose is
// declared in snapshotRenames, which keeps the older snapshots readable.
// The previous release's layout (snapshotMagicV2: no header) is read too;
// a store that release wrote is opened by TestPreviousReleaseStore.
const (
	snapshotMagic   = "gandiva-snapshot-3\n"
	snapshotMagicV2 = "gandiva-snapshot-2\n"
	snapshotFormat  = 3
)

// snapshotHeader heads a snapshot's data.
type snapshotHeader struct {
	Format int    `json:"format"`
	Schema string `json:"schema"`
	Build  string `json:"build,omitempty"`
}

// snapshotRenames are the fields of the snapshot's types renamed or
// removed (New "") since the previous release, so that its snapshots are
// still read whole (codec.Rename). A change that cannot be said so (a
// field whose kind changed) must keep the old field, or bump
// snapshotFormat with a migration.
var snapshotRenames []codec.Rename

// snapshotOptions: the machine's configuration is given to the restored
// machine, not stored; its engine is stored as the second part.
var snapshotOptions = &codec.Options{Skip: []codec.Field{
	{Type: reflect.TypeFor[machine](), Name: "cfg"},
	{Type: reflect.TypeFor[machine](), Name: "eng"},
}}

// decodeOptions are the options snapshots are decoded with (for the
// machine: skip those of snapshotOptions).
func decodeOptions(skip bool) *codec.Options {
	o := &codec.Options{Strict: true, Renames: snapshotRenames}
	if skip {
		o.Skip = snapshotOptions.Skip
	}
	return o
}

// snapshotSchema returns the schema fingerprint of snapshots of a machine
// with policy pol (computed once per policy type).
func snapshotSchema(pol policy.Policy) (string, error) {
	pt := reflect.TypeOf(pol)
	if v, ok := schemas.Load(pt); ok {
		return v.(string), nil
	}
	roots := []reflect.Type{reflect.TypeFor[machine](), reflect.TypeFor[engine.State]()}
	if pt != nil {
		roots = append(roots, pt)
	}
	schema, err := codec.Schema(snapshotOptions, roots...)
	if err != nil {
		return "", fmt.Errorf("the snapshot's schema: %w", err)
	}
	fp := codec.Fingerprint(schema)
	schemas.Store(pt, fp)
	return fp, nil
}

var schemas sync.Map // reflect.Type of a policy → its snapshots' schema fingerprint

// buildName names this build in snapshot headers: the module's version and
// the commit it was built from, when the toolchain recorded them.
var buildName = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	name := bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			name += " " + s.Value[:min(len(s.Value), 12)]
		case "vcs.modified":
			if s.Value == "true" {
				name += "+modified"
			}
		}
	}
	return name
})

// marshal encodes the machine's state; hint is the expected size (the
// last snapshot's), 0 if unknown.
func (m *machine) marshal(hint int) ([]byte, error) {
	schema, err := snapshotSchema(m.cfg.Policy)
	if err != nil {
		return nil, err
	}
	hdr, err := json.Marshal(snapshotHeader{Format: snapshotFormat, Schema: schema, Build: buildName()})
	if err != nil {
		return nil, err
	}
	st, err := m.eng.Export()
	if err != nil {
		return nil, err
	}
	opts := *snapshotOptions
	opts.SizeHint = hint / 3
	mdata, err := codec.Marshal(m, &opts)
	if err != nil {
		return nil, fmt.Errorf("encoding the state: %w", err)
	}
	edata, err := codec.Marshal(st, &codec.Options{SizeHint: hint - len(mdata)})
	if err != nil {
		return nil, fmt.Errorf("encoding the engine's state: %w", err)
	}
	data := make([]byte, 0, len(snapshotMagic)+len(hdr)+2*binary.MaxVarintLen64+len(mdata)+len(edata))
	data = append(data, snapshotMagic...)
	data = binary.AppendUvarint(data, uint64(len(hdr)))
	data = append(data, hdr...)
	data = binary.AppendUvarint(data, uint64(len(mdata)))
	data = append(data, mdata...)
	return append(data, edata...), nil
}

// readSnapshotHeader splits a snapshot's data into its header and the
// rest (the parts). A snapshot of the previous release's layout has a
// header with Format 2 and no schema.
func readSnapshotHeader(data []byte) (snapshotHeader, []byte, error) {
	if rest, ok := bytes.CutPrefix(data, []byte(snapshotMagicV2)); ok {
		return snapshotHeader{Format: 2, Build: "the release before format 3"}, rest, nil
	}
	rest, ok := bytes.CutPrefix(data, []byte(snapshotMagic))
	if !ok {
		if bytes.HasPrefix(data, []byte("gandiva-snapshot-")) {
			line, _, _ := bytes.Cut(data[:min(len(data), 40)], []byte("\n"))
			return snapshotHeader{}, nil, fmt.Errorf("a snapshot of format %q, which this build (format %d) does not read: "+
				"it was written by a newer build", line, snapshotFormat)
		}
		return snapshotHeader{}, nil, errors.New("not a snapshot")
	}
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > 1<<12 || n > uint64(len(rest)-k) {
		return snapshotHeader{}, nil, errors.New("its header is truncated or too long")
	}
	var h snapshotHeader
	if err := json.Unmarshal(rest[k:k+int(n)], &h); err != nil {
		return snapshotHeader{}, nil, fmt.Errorf("its header: %w", err)
	}
	if h.Format != snapshotFormat {
		return h, nil, fmt.Errorf("format %d (written by %s), which this build (format %d) does not read", h.Format, h.Build, snapshotFormat)
	}
	return h, rest[k+int(n):], nil
}

// restoreMachine builds a machine with cfg (its policy fresh) from a
// snapshot's data, of which it keeps nothing (the data may be the store's
// mapped file: store.ViewSnapshot). A snapshot another build wrote is
// read whole or refused (see the contract above); its error says which
// build wrote it.
func restoreMachine(cfg machineConfig, data []byte) (*machine, error) {
	hdr, data, err := readSnapshotHeader(data)
	if err != nil {
		return nil, fmt.Errorf("decoding the state: %w", err)
	}
	schema, err := snapshotSchema(cfg.Policy)
	if err != nil {
		return nil, err
	}
	n, k := binary.Uvarint(data)
	if k <= 0 || n > uint64(len(data)-k) {
		return nil, errors.New("decoding the state: truncated")
	}
	mdata, edata := data[k:k+int(n)], data[k+int(n):]
	// the engine's part meanwhile
	st := &engine.State{}
	engErr := make(chan error, 1)
	go func() { engErr <- codec.Unmarshal(edata, st, decodeOptions(false)) }()
	m := newMachine(cfg)
	err = codec.Unmarshal(mdata, m, decodeOptions(true))
	if eerr := <-engErr; err == nil && eerr != nil {
		err = fmt.Errorf("the engine's: %w", eerr)
	}
	if err == nil {
		var eng *engine.Engine
		eng, err = engine.Adopt(m.c, cfg.Policy, m.x, m.engineOptions(), st) // (st was decoded for it alone)
		m.eng = eng
	}
	if err != nil {
		if hdr.Schema != schema {
			return nil, fmt.Errorf("decoding the state, written by build %s (format %d, schema %q; this build's schema is %q): %w",
				hdr.Build, hdr.Format, hdr.Schema, schema, err)
		}
		return nil, fmt.Errorf("decoding the state: %w", err)
	}
	if hdr.Schema != schema && cfg.Log != nil {
		cfg.Log.Info("snapshot of another schema read whole: every field it holds has a place in this build's",
			"written_by", hdr.Build, "format", hdr.Format, "schema", hdr.Schema, "this_schema", schema)
	}
	if m.x.dirty == nil {
		m.x.dirty = map[*run]bool{}
	}
	m.x.markStale()
	return m, nil
}

// ReplayInfo describes the recovery at Open.
type ReplayInfo struct {
	// Snapshot is the log entry of the snapshot the state was read from (0:
	// none), SnapshotBytes its size and SnapshotTook the time to read and
	// decode it.
	Snapshot      uint64
	SnapshotBytes int
	SnapshotTook  time.Duration
	// Entries are the log entries replayed (after the snapshot).
	Entries int
	// Took is the whole recovery: snapshot and replay.
	Took time.Duration
	// Diverged counts the state changes of the replayed entries that differ
	// from the recorded ones.
	Diverged int
}

// recover recovers the state (replay) and makes the server ready. (The
// nodes' time-outs count from Server.started, the opening.)
func (s *Server) recover() {
	defer close(s.ready)
	if g := s.cfg.recoverGate; g != nil {
		<-g
	}
	if err := s.replay(); err != nil {
		s.recErr = err
		return
	}
	s.met.snap.bytes.Set(float64(s.Replay.SnapshotBytes))
}

// Recovered waits until the state is recovered (OpenAsync), and returns
// the error that stopped the recovery, if any.
func (s *Server) Recovered(ctx context.Context) error {
	select {
	case <-s.ready:
		return s.recErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// await waits for the recovery, for an API call that needs the state.
func (s *Server) await(ctx context.Context) error {
	select {
	case <-s.ready:
	default:
		select {
		case <-s.ready:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.recErr != nil {
		return api.Unavailable("the server could not recover its state: %v", s.recErr)
	}
	return nil
}

// rebuilder rebuilds a machine from a store: its newest usable snapshot
// and the log entries after it (the server's recovery, and ReadHistory).
type rebuilder struct {
	db        *store.DB
	newPolicy func() (policy.Policy, error)
	config    func(policy.Policy) machineConfig
	log       *slog.Logger
}

// rebuild returns the machine, what it took (Took and Diverged
// included), and the time the replay of the entries took.
func (rb rebuilder) rebuild() (*machine, ReplayInfo, time.Duration, error) {
	start := time.Now()
	var ri ReplayInfo
	from, changesFrom := uint64(1), uint64(1)
	m, info, unusable, err := rb.loadSnapshot(&ri)
	if err != nil {
		return nil, ri, 0, err
	}
	if info != nil {
		from, changesFrom = info.Seq+1, info.Changes+1
	} else if first, err := rb.db.FirstSeq(); err != nil {
		return nil, ri, 0, err
	} else if first > 1 {
		return nil, ri, 0, fmt.Errorf("store %s: the log was compacted up to entry %d and no snapshot of the state could be read by this build (%s): %w. "+
			"Its jobs, log and snapshots are as they were: start the build that wrote the snapshot again (the error names it), or restore the backup taken before the upgrade",
			rb.db.Path(), first-1, buildName(), errors.Join(unusable...))
	} else {
		pol, err := rb.newPolicy()
		if err != nil {
			return nil, ri, 0, err
		}
		m = newMachine(rb.config(pol))
	}
	// The recorded history, to compare the replay with, is read meanwhile.
	var recorded []change
	histErr := make(chan error, 1)
	go func() {
		histErr <- rb.db.ChangesFrom(changesFrom, func(_ uint64, data []byte) error {
			var ch change
			if err := json.Unmarshal(data, &ch); err != nil {
				return err
			}
			recorded = append(recorded, ch)
			return nil
		})
	}()
	t0 := time.Now()
	err = readLog(rb.db, from, func(seq uint64, e *entry) error {
		if err := m.apply(seq, e); err != nil {
			rb.log.Warn("replay: entry not applied (as when it was first applied)", "seq", seq, "kind", e.Kind, "err", err)
		}
		ri.Entries++
		return nil
	})
	applied := time.Since(t0)
	if herr := <-histErr; herr != nil {
		return nil, ri, 0, fmt.Errorf("reading the change history: %w", herr)
	}
	if err != nil {
		return nil, ri, 0, fmt.Errorf("replaying the log: %w", err)
	}
	got := m.takeChanges()
	for i := 0; i < max(len(got), len(recorded)); i++ {
		if i >= len(got) || i >= len(recorded) || got[i] != recorded[i] {
			ri.Diverged++
		}
	}
	if ri.Diverged > 0 {
		rb.log.Warn("replay diverged from the recorded history (a policy changed by an upgrade, or a nondeterministic one)",
			"differences", ri.Diverged, "recorded", len(recorded), "replayed", len(got))
	}
	ri.Took = time.Since(start)
	return m, ri, applied, nil
}

// loadSnapshot returns a machine restored from the newest snapshot that
// can be read, and its info (nil, nil: none could be, or there is none),
// noting it in ri; unusable are the errors of the newer ones that could
// not be read.
func (rb rebuilder) loadSnapshot(ri *ReplayInfo) (_ *machine, _ *store.SnapshotInfo, unusable []error, _ error) {
	infos, err := rb.db.Snapshots()
	if err != nil {
		return nil, nil, nil, err
	}
	for i := range infos {
		info := &infos[i]
		t0 := time.Now()
		pol, err := rb.newPolicy()
		if err != nil {
			return nil, nil, unusable, err
		}
		// decoded where the store maps it (restoreMachine keeps nothing of
		// the data), so the restart does not hold the state twice
		var m *machine
		err = rb.db.ViewSnapshot(info.Seq, func(data []byte) error {
			var err error
			m, err = restoreMachine(rb.config(pol), data)
			ri.SnapshotBytes = len(data)
			return err
		})
		if err == nil {
			ri.Snapshot, ri.SnapshotTook = info.Seq, time.Since(t0)
			return m, info, unusable, nil
		}
		ri.SnapshotBytes = 0
		rb.log.Warn("snapshot not usable; trying an older one, or the log", "entry", info.Seq, "err", err)
		unusable = append(unusable, fmt.Errorf("the snapshot at entry %d: %w", info.Seq, err))
	}
	return nil, nil, unusable, nil
}

// replay rebuilds the machine from the newest usable snapshot and the log
// entries after it, and checks the state changes they produce against
// those recorded when the entries were first applied.
func (s *Server) replay() error {
	m, ri, applied, err := rebuilder{db: s.db, newPolicy: s.cfg.newPolicy, config: s.machineConfig, log: s.cfg.Log}.rebuild()
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	s.m, s.Replay = m, ri
	s.snap.last, s.snap.applied = ri.Snapshot, applied // (what replaying these again would cost)
	s.snap.size.Store(int64(ri.SnapshotBytes))
	if ri.Diverged > 0 {
		s.cfg.Log.Warn("agents will be reconciled to the replayed state")
	}
	// Nothing new starts on a node until it registers with this process,
	// and the sessions of the previous process are void: an agent still
	// polling with one gets 409 and registers again, telling us what it runs.
	s.m.x.voidSessions()
	s.nextSeq, err = s.db.NextSeq()
	if ri.Entries > 0 || ri.Snapshot > 0 {
		s.cfg.Log.Info("recovered", "snapshot_entry", ri.Snapshot, "snapshot_bytes", ri.SnapshotBytes,
			"entries", ri.Entries, "jobs", len(s.m.order), "nodes", len(s.m.x.nodes), "took", ri.Took.Round(time.Millisecond))
	}
	return err
}

// snapState is the loop's bookkeeping of snapshots.
type snapState struct {
	last    uint64        // the entry of the last snapshot taken or read
	applied time.Duration // time spent applying the entries since then
	cost    atomic.Int64  // what the last one cost (encoding and writing), in ns
	size    atomic.Int64  // the last one's size in bytes
	writing atomic.Bool   // a write is in flight
	wg      sync.WaitGroup
	// observe, when set, is told each snapshot's costs and size (benchmarks)
	observe func(encode, write time.Duration, size int)
}

// maybeSnapshot takes a snapshot if one is due (see Recovery above). The
// loop calls it between batches.
func (s *Server) maybeSnapshot() {
	if s.cfg.SnapshotEvery < 0 || s.snap.writing.Load() {
		return
	}
	since := s.nextSeq - 1 - s.snap.last
	if since == 0 || (since < uint64(s.cfg.SnapshotEvery) && s.snap.applied < s.cfg.SnapshotAfter) {
		return
	}
	// never more of the loop's time on snapshots than on entries
	if s.snap.applied < time.Duration(s.snap.cost.Load()) {
		return
	}
	s.takeSnapshot()
}

// reqSnapshot is a request (not a log entry) for a snapshot now.
const reqSnapshot = "snapshot"

// snapshotNow has the loop take a snapshot now, and waits until it is
// written. (For tests; the loop takes them by itself.)
func (s *Server) snapshotNow(ctx context.Context) error {
	return s.do(ctx, &req{kind: reqSnapshot})
}

// forcedSnapshots takes a snapshot if batch asks for one (snapshotNow),
// waits for it and gives its error to the requests; it reports whether it
// took one.
func (s *Server) forcedSnapshots(batch []*req) bool {
	var asked []*req
	for _, r := range batch {
		if r.kind == reqSnapshot && r.err == nil {
			asked = append(asked, r)
		}
	}
	if len(asked) == 0 {
		return false
	}
	s.snap.wg.Wait() // one being written
	var err error
	if s.nextSeq-1 != s.snap.last { // (else the last one is this state)
		err = s.takeSnapshot()()
	}
	for _, r := range asked {
		r.err = err
	}
	return true
}

// takeSnapshot encodes the state (under the read lock, on the loop) and
// writes it in the background; wait waits for the write and returns the
// error, if any (each is also logged and counted).
func (s *Server) takeSnapshot() (wait func() error) {
	t0 := time.Now()
	s.mu.RLock()
	seq := s.nextSeq - 1
	changes, err := s.db.ChangesLen()
	var data []byte
	if err == nil && seq > 0 {
		data, err = s.m.marshal(int(s.snap.size.Load()))
	}
	s.mu.RUnlock()
	enc := time.Since(t0)
	s.snap.last, s.snap.applied = seq, 0
	if err == nil && seq == 0 {
		err = errors.New("the log is empty")
	}
	if err != nil {
		s.met.snapshotFailed()
		s.cfg.Log.Error("snapshot not taken; restarts replay more of the log", "entry", seq, "err", err)
		s.snap.cost.Store(int64(enc))
		return func() error { return err }
	}
	s.snap.writing.Store(true)
	s.snap.wg.Add(1)
	done := make(chan error, 1)
	go func() {
		defer s.snap.wg.Done()
		defer s.snap.writing.Store(false)
		t1 := time.Now()
		deleted, err := s.db.SaveSnapshot(store.SnapshotInfo{Seq: seq, Changes: changes, Created: s.cfg.Clock()}, data)
		write := time.Since(t1)
		s.snap.cost.Store(int64(enc + write))
		if err != nil {
			s.met.snapshotFailed()
			s.cfg.Log.Error("snapshot not written; restarts replay more of the log", "entry", seq, "err", err)
		} else {
			s.snap.size.Store(int64(len(data)))
			s.met.snapshot(enc, write, len(data), deleted)
			if s.snap.observe != nil {
				s.snap.observe(enc, write, len(data))
			}
			s.cfg.Log.Debug("snapshot", "entry", seq, "bytes", len(data), "encode", enc.Round(time.Millisecond),
				"write", write.Round(time.Millisecond), "compacted", deleted)
		}
		done <- err
	}()
	return func() error { return <-done }
}

// snapMetrics are the snapshots' metrics.
type snapMetrics struct {
	taken     prometheus.Counter
	failed    prometheus.Counter
	encode    prometheus.Histogram
	write     prometheus.Histogram
	bytes     prometheus.Gauge
	compacted prometheus.Counter
}

func newSnapMetrics(reg *prometheus.Registry, s *Server) snapMetrics {
	m := snapMetrics{
		taken:  prometheus.NewCounter(prometheus.CounterOpts{Name: "gandiva_snapshots_total", Help: "Snapshots of the state written since the server started."}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "gandiva_snapshot_failures_total", Help: "Snapshots that could not be encoded or written (each is logged; 0 expected)."}),
		encode: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gandiva_snapshot_encode_seconds",
			Help: "Time the loop spent encoding a snapshot (writes to the API wait meanwhile; reads do not).", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		write: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gandiva_snapshot_write_seconds",
			Help: "Time to write a snapshot and compact the log (in the background; the next commit waits for it).", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		bytes:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "gandiva_snapshot_bytes", Help: "Size of the last snapshot written, or read at the start."}),
		compacted: prometheus.NewCounter(prometheus.CounterOpts{Name: "gandiva_log_entries_compacted_total", Help: "Log entries deleted by compaction since the server started."}),
	}
	start := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gandiva_start_snapshot_seconds", Help: "Time the last start took to read and decode its snapshot (0: none, or recovering)."},
		func() float64 { return s.replayInfo().SnapshotTook.Seconds() })
	replayed := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gandiva_start_replayed_entries", Help: "Log entries the last start replayed (after its snapshot)."},
		func() float64 { return float64(s.replayInfo().Entries) })
	from := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gandiva_start_snapshot_entry", Help: "The log entry of the snapshot the last start read (0: none, it replayed the whole log; or recovering)."},
		func() float64 { return float64(s.replayInfo().Snapshot) })
	reg.MustRegister(m.taken, m.failed, m.encode, m.write, m.bytes, m.compacted, start, replayed, from)
	return m
}

// replayInfo is s.Replay once the state is recovered, else zero.
func (s *Server) replayInfo() ReplayInfo {
	select {
	case <-s.ready:
		return s.Replay
	default:
		return ReplayInfo{}
	}
}

func (m *serverMetrics) snapshot(enc, write time.Duration, size, compacted int) {
	m.snap.taken.Inc()
	m.snap.encode.Observe(enc.Seconds())
	m.snap.write.Observe(write.Seconds())
	m.snap.bytes.Set(float64(size))
	m.snap.compacted.Add(float64(compacted))
}

func (m *serverMetrics) snapshotFailed() { m.snap.failed.Inc() }
