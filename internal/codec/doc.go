// Package codec encodes a graph of Go values to bytes and back, exactly:
// every field of every struct (unexported ones included), pointers shared
// between several places (the decoded graph shares them the same way),
// cycles, maps (in a deterministic order), interfaces and values with a
// binary form of their own (time.Time, math/rand/v2's generators). It is
// what makes the state of the engine, of any policy and of the live
// server's state machine storable (snapshots) and copyable (forks) without
// a hand-written encoder per type: a field added to any of them is encoded
// with no further change, so it cannot be forgotten.
//
// # Contract
//
// Marshal(root, opts) encodes the graph reachable from root, a non-nil
// pointer. Unmarshal(data, root, opts) decodes it into root, a pointer to a
// value of the same type, usually a freshly constructed one:
//
//   - Func fields are not encoded; decoding keeps the target's (a fresh
//     instance binds its own methods). Fields listed in Options.Skip are
//     treated the same way: left out, kept from the target.
//   - A pointer is encoded once per object; later pointers to the same
//     object (same address and type) decode to the same new object. A
//     pointer into the root value (a field of it) decodes to the same field
//     of the decode target. A pointer into the middle of another object is
//     refused (Marshal fails), so that sharing is never silently lost.
//   - Slices are decoded into arrays of their own (with capacity = length);
//     two slices that shared one backing array no longer do. Nil and empty
//     slices and maps are kept apart.
//   - Pointers of the types in Options.Externs stand for objects owned
//     outside the graph (the engine's jobs, say): they are encoded as
//     numbers, which decoding resolves with the extern's Deref.
//   - When decoding into an object the target already points to (the
//     fields of a fresh instance), that object is decoded into rather
//     than replaced, so its skipped and func fields survive; an object
//     the target shares between two places is reused once only.
//   - Chans, complex numbers, uintptrs and unsafe pointers are refused,
//     naming the type and field that holds them.
//
// The encoding is self-describing: it carries a table of its types (kinds,
// struct field names, element types), and decoding matches struct fields by
// name. A field the decoding program does not have is skipped, or, with
// Options.Strict, an error naming it (unless Options.Renames says where it
// went: a field renamed, or removed on purpose); a field the encoding lacks
// keeps the target's value; a field whose kind changed (an int that became
// a string) is an error naming it. A type that moved or was renamed is
// found by its old name through Options.Aliases. So a snapshot written by
// one build is read by the next one whole, with new fields at their fresh
// values, or refused: never with a field silently dropped (Strict).
//
// Schema describes the types an encoding of given roots holds (every
// field's name, kind and type), and Fingerprint hashes it: what a store
// records in a header, so that a change of the format is never silent.
//
// Decoding never panics on bad input: truncated or corrupt data is an
// error (the decoder is fuzzed).
//
// The package uses package unsafe to read and write unexported fields; it
// does no I/O and keeps no state between calls.
package codec
