package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/codec"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/store"
)

// The previous release's store (testdata/prev-release): written by the
// release before the snapshot format contract (commit cb78f09), with
// testdata/prev-release/gen_test.go.txt run in that release's
// internal/server: jobs finished, cancelled, running and queued on two
// nodes, under the gandiva policy; two snapshots (of that release's
// layout, gandiva-snapshot-2) with the log compacted up to the older one,
// and entries after the newer (three submissions and a cancel). state.json
// is what that build showed of it. At each release, the store the last one
// writes replaces it (rerun the generator there).
var prevReleaseConfig = Config{Policy: "gandiva", WarmStarts: -1}

// prevJob is what a job must keep across an upgrade.
type prevJob struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	User      string    `json:"user"`
	Command   []string  `json:"command"`
	GPUs      int       `json:"gpus"`
	State     string    `json:"state"`
	Reason    string    `json:"reason"`
	Submitted time.Time `json:"submitted"`
	Started   time.Time `json:"started"`
	Ended     time.Time `json:"ended"`
	Done      float64   `json:"done"`
	Attempts  int       `json:"attempts"`
	Workers   []struct {
		Node    string `json:"node"`
		GPUs    []int  `json:"gpus"`
		Attempt uint64 `json:"attempt"`
	} `json:"workers"`
	History []struct {
		At       time.Time `json:"at"`
		From, To string
		Reason   string `json:"reason"`
	} `json:"history"`
}

// prevReleaseStore unpacks the previous release's store into a new data
// directory and returns it, with what that build showed of it.
func prevReleaseStore(t *testing.T) (dir string, want []prevJob, snaps []store.SnapshotInfo, nextSeq uint64) {
	t.Helper()
	f, err := os.Open("testdata/prev-release/gandiva.db.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	db, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "gandiva.db"), db, 0o600); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/prev-release/state.json")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Jobs      []prevJob            `json:"jobs"`
		NextSeq   uint64               `json:"next_seq"`
		Snapshots []store.SnapshotInfo `json:"snapshots"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	return dir, st.Jobs, st.Snapshots, st.NextSeq
}

// TestPreviousReleaseStore: this build opens the store the previous
// release wrote, from its newest snapshot (the log before the older one is
// compacted away: the snapshot must be read, strictly, every field it
// holds with a place here) and the entries after it, with no divergence;
// every job is as that build showed it. It then goes on: a new
// submission, a snapshot of this build's format, and a restart from it.
func TestPreviousReleaseStore(t *testing.T) {
	dir, want, snaps, nextSeq := prevReleaseStore(t)
	cfg := prevReleaseConfig
	cfg.DataDir = dir
	s, stop := runServer(t, cfg)
	// (its jobs' checkpoints stay where that release put them)
	if s.cluster != "" || s.ckptRoot != filepath.Join(dir, "checkpoints") {
		t.Errorf("the previous release's store is named %q, with checkpoint root %s: want none, and its root as it was", s.cluster, s.ckptRoot)
	}
	if ri := s.Replay; ri.Snapshot != snaps[0].Seq || ri.Entries != int(nextSeq-1-snaps[0].Seq) || ri.Diverged != 0 {
		t.Fatalf("recovery %+v: want the snapshot at entry %d, the %d entries after it, no divergence", ri, snaps[0].Seq, nextSeq-1-snaps[0].Seq)
	}
	ctx := context.Background()
	admin := api.Principal{User: "admin", Admin: true}
	jobs, err := s.List(ctx, admin, api.ListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []prevJob
	for _, j := range jobs {
		v, err := s.Get(ctx, admin, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(v)
		var pj prevJob
		if err := json.Unmarshal(b, &pj); err != nil {
			t.Fatal(err)
		}
		got = append(got, pj)
	}
	if len(got) != len(want) {
		t.Fatalf("%d jobs, the previous release had %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			g, _ := json.Marshal(got[i])
			w, _ := json.Marshal(want[i])
			t.Errorf("job %s differs:\n got %s\nwant %s", want[i].ID, g, w)
		}
	}
	addNode(t, s, "n3")
	j, _, err := s.Submit(ctx, api.Principal{User: "carol"}, &api.JobRequest{Command: []string{"train"}, GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.snapshotNow(ctx); err != nil {
		t.Fatal(err)
	}
	// (a starting job's line says for how long, on the wall clock)
	seconds := regexp.MustCompile(`"starting \(\d+ s\)"`)
	before := seconds.ReplaceAllString(state(t, s), "")
	stop()
	s2, stop2 := runServer(t, cfg)
	defer stop2()
	if s2.Replay.Snapshot <= snaps[0].Seq || s2.Replay.Diverged != 0 {
		t.Fatalf("restart after the upgrade: %+v, want this build's snapshot", s2.Replay)
	}
	if after := seconds.ReplaceAllString(state(t, s2), ""); after != before {
		t.Fatalf("state after the restart differs.\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if _, err := s2.Get(ctx, admin, j.ID); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotOfRenamedFieldRefused: a snapshot that holds a field this
// build's types lack (here the machine's submits, as a build that called
// it submitCount wrote it: renamed since) is never read with the field
// dropped. With the log compacted, the server refuses to start, naming the
// store, the field, the build that wrote the snapshot and what to do, and
// the store's contents are left as they were; once the rename is declared
// (snapshotRenames), the same store opens with every job intact.
func TestSnapshotOfRenamedFieldRefused(t *testing.T) {
	dir, want, snaps, _ := prevReleaseStore(t)
	path := filepath.Join(dir, "gandiva.db")
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range snaps {
		if err := rewriteSnapshot(b, info.Seq, func(data []byte) ([]byte, error) {
			return renameMachineField(data, "submits", "submitCount")
		}); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	orig := storeContents(t, path)
	cfg := prevReleaseConfig
	cfg.DataDir = dir
	s, err := Open(cfg)
	if err == nil {
		s.Close()
		t.Fatal("the server started on snapshots whose field it would drop")
	}
	for _, w := range []string{path, "compacted", "submitCount", "written by build", "restore the backup"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not say %q: %v", w, err)
		}
	}
	if after := storeContents(t, path); after != orig {
		t.Errorf("the store was changed:\n%s\nwas\n%s", after, orig)
	}

	defer func(r []codec.Rename) { snapshotRenames = r }(snapshotRenames)
	snapshotRenames = append(snapshotRenames, codec.Rename{Type: reflect.TypeFor[machine](), Old: "submitCount", New: "submits"})
	s, stop := runServer(t, cfg)
	defer stop()
	if s.Replay.Snapshot != snaps[0].Seq || s.Replay.Diverged != 0 {
		t.Fatalf("recovery with the rename declared: %+v", s.Replay)
	}
	s.mu.RLock()
	n, submits := len(s.m.order), s.m.submits
	s.mu.RUnlock()
	if n != len(want) || submits != len(want) {
		t.Fatalf("%d jobs, submits %d; want %d of each", n, submits, len(want))
	}
}

// storeContents lists what a store holds (but its boot counter): its
// snapshots, log, job records and changes.
func storeContents(t *testing.T, path string) string {
	t.Helper()
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var b strings.Builder
	snaps, err := db.Snapshots()
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range snaps {
		data, err := db.ReadSnapshot(info.Seq)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "snapshot %d %d %x\n", info.Seq, info.Changes, crc32.ChecksumIEEE(data))
	}
	err = errors.Join(
		db.Log(1, func(seq uint64, e []byte) error {
			fmt.Fprintf(&b, "entry %d %x\n", seq, crc32.ChecksumIEEE(e))
			return nil
		}),
		db.Jobs(func(id string, rec []byte) error {
			fmt.Fprintf(&b, "job %s %x\n", id, crc32.ChecksumIEEE(rec))
			return nil
		}),
		db.Changes(func(seq uint64, c []byte) error {
			fmt.Fprintf(&b, "change %d %x\n", seq, crc32.ChecksumIEEE(c))
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// renameMachineField renames a field of the machine in a snapshot of the
// previous release's layout: in its machine part's type table only (a
// field's name is there, once; its values do not name it).
func renameMachineField(data []byte, old, new string) ([]byte, error) {
	rest, ok := bytes.CutPrefix(data, []byte(snapshotMagicV2))
	if !ok {
		return nil, errors.New("not a format-2 snapshot")
	}
	n, k := binary.Uvarint(rest)
	mdata, edata := rest[k:k+int(n)], rest[k+int(n):]
	off := binary.LittleEndian.Uint64(mdata[len(mdata)-8:])
	table := mdata[off : len(mdata)-8]
	from := append([]byte{byte(len(old))}, old...)
	if c := bytes.Count(table, from); c != 1 {
		return nil, fmt.Errorf("field %s is %d times in the type table", old, c)
	}
	table = bytes.Replace(table, from, append([]byte{byte(len(new))}, new...), 1)
	m := append(append(bytes.Clone(mdata[:off]), table...), mdata[len(mdata)-8:]...)
	out := binary.AppendUvarint([]byte(snapshotMagicV2), uint64(len(m)))
	out = append(out, m...)
	return append(out, edata...), nil
}

// rewriteSnapshot replaces the data of the stored snapshot at entry seq
// with what fn makes of it, with its size and CRC (as the store keeps
// them: store/snapshot.go).
func rewriteSnapshot(b *bolt.DB, seq uint64, fn func([]byte) ([]byte, error)) error {
	return b.Update(func(tx *bolt.Tx) error {
		var k [8]byte
		binary.BigEndian.PutUint64(k[:], seq)
		sb := tx.Bucket([]byte("snapshots")).Bucket(k[:])
		data, err := fn(bytes.Clone(sb.Get([]byte("data/000000"))))
		if err != nil {
			return err
		}
		var info map[string]any
		if err := json.Unmarshal(sb.Get([]byte("info")), &info); err != nil {
			return err
		}
		info["size"], info["crc32c"] = len(data), crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))
		ib, err := json.Marshal(info)
		if err != nil {
			return err
		}
		if err := sb.Put([]byte("info"), ib); err != nil {
			return err
		}
		return sb.Put([]byte("data/000000"), data)
	})
}

// TestSnapshotSchema: the schema of the snapshots (every field of every
// type they hold, for each policy), and the JSON fields of the log
// entries, job records and changes, are testdata/snapshot-schema.txt. A
// change of it is a change of the store's format: review it in the diff,
// keep TestPreviousReleaseStore passing (declare renamed and removed
// snapshot fields in snapshotRenames; a JSON field may be added, never
// renamed or retyped under one store.Schema), and rewrite the file with
// -rewrite.
func TestSnapshotSchema(t *testing.T) {
	var b strings.Builder
	roots := []reflect.Type{reflect.TypeFor[machine](), reflect.TypeFor[engine.State]()}
	for _, e := range registry.All() {
		p, err := e.Factory(policy.Config{})
		if err != nil {
			t.Fatal(err)
		}
		fp, err := snapshotSchema(p)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "policy %s: schema %s\n", e.Name, fp)
		roots = append(roots, reflect.TypeOf(p))
	}
	all, err := codec.Schema(snapshotOptions, roots...)
	if err != nil {
		t.Fatal(err)
	}
	got := "# The schema of the snapshots (TestSnapshotSchema; rewrite with -rewrite, after reading its comment).\n" +
		fmt.Sprintf("format %d\n", snapshotFormat) + b.String() + "\n" + all +
		"\n# The JSON documents of the store (" + store.Schema + "): log entries, job records, changes.\n" +
		jsonSchema(reflect.TypeFor[entry](), reflect.TypeFor[Record](), reflect.TypeFor[change]())
	const file = "testdata/snapshot-schema.txt"
	if f := flag.Lookup("rewrite"); f != nil && f.Value.String() == "true" {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		t.Fatalf("the snapshots' schema changed (%s): this changes the store's format. Review the change, keep TestPreviousReleaseStore passing "+
			"(declare renamed or removed fields in snapshotRenames) and rewrite the file with -rewrite.\n%s", file, lineDiff(string(want), got))
	}
}

// jsonSchema lists the JSON fields of the struct types reachable from
// roots (through pointers, slices, maps and fields), one type a line, in
// the order met: each field's JSON name, options and Go type.
func jsonSchema(roots ...reflect.Type) string {
	var b strings.Builder
	seen := map[reflect.Type]bool{}
	var visit func(t reflect.Type)
	visit = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			if t.Kind() == reflect.Map {
				visit(t.Key())
			}
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] || t == reflect.TypeFor[time.Time]() {
			return
		}
		seen[t] = true
		fmt.Fprintf(&b, "%s.%s", t.PkgPath(), t.Name())
		var next []reflect.Type
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag, ok := f.Tag.Lookup("json")
			if !f.IsExported() || tag == "-" {
				continue
			}
			if !ok {
				tag = f.Name
			}
			fmt.Fprintf(&b, " %s:%s", tag, f.Type)
			next = append(next, f.Type)
		}
		b.WriteByte('\n')
		for _, n := range next {
			visit(n)
		}
	}
	for _, t := range roots {
		visit(t)
	}
	return b.String()
}

// lineDiff lists the lines only one of a and b has.
func lineDiff(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	var out []string
	for _, l := range strings.Split(a, "\n") {
		if !mb[l] {
			out = append(out, "- "+l)
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if !ma[l] {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out[:min(len(out), 40)], "\n")
}

// TestClusterNamed: a new store is named once, keeps its name across
// restarts, and its jobs' checkpoint root is below that name, so that two
// stores sharing a checkpoint root (whose job IDs both start at j1) keep
// their checkpoints apart; agents are told the name at registration.
func TestClusterNamed(t *testing.T) {
	dir := t.TempDir()
	s, stop := runServer(t, Config{DataDir: dir, Policy: "fifo"})
	name := s.cluster
	stop()
	if ok, _ := regexp.MatchString(`^c[0-9a-f]{16}$`, name); !ok {
		t.Fatalf("a new store is named %q, want c and 16 hex digits", name)
	}
	s, stop = runServer(t, Config{DataDir: dir, Policy: "fifo"})
	defer stop()
	if s.cluster != name || s.ckptRoot != filepath.Join(dir, "checkpoints", name) {
		t.Errorf("reopened: named %q with checkpoint root %s, want %q and %s", s.cluster, s.ckptRoot, name, filepath.Join(dir, "checkpoints", name))
	}
	other, stop2 := runServer(t, Config{DataDir: t.TempDir(), Policy: "fifo"})
	defer stop2()
	if other.cluster == name {
		t.Errorf("two stores both named %q", name)
	}
	rep, err := s.Register(context.Background(), nodeP("n1"), &api.Registration{Name: "n1", GPUs: []api.GPU{{Index: 0, Type: "V100", MemGiB: 16}},
		HostMemGiB: 64, Addr: "http://127.0.0.1:1", LogKey: "k", Incarnation: "inc-n1"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Cluster != name || rep.CheckpointRoot != s.ckptRoot {
		t.Errorf("registration reply names cluster %q, root %s; want %q, %s", rep.Cluster, rep.CheckpointRoot, name, s.ckptRoot)
	}
	a := &fakeAgent{t: t, s: s, name: "n1", session: rep.Session}
	if _, _, err := s.Submit(context.Background(), api.Principal{User: "alice"}, &api.JobRequest{Command: []string{"train"}, GPUs: 1}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if items := a.assignments(); len(items) > 0 {
			if want := filepath.Join(dir, "checkpoints", name, "alice", items[0].Job); !strings.HasPrefix(items[0].CheckpointDir, want) {
				t.Errorf("checkpoint directory %s, want one in %s", items[0].CheckpointDir, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no assignment within 30 s")
		}
	}
}
