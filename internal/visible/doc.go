// Package visible shows strings that users, jobs and nodes control (job
// names and commands, work directories, node names, GPU types, reasons
// that quote them) on a terminal without letting them act on it, and
// checks the names people choose.
//
// A terminal obeys some characters instead of showing them: ESC starts
// sequences that move the cursor, recolour, retitle the window or rewrite
// what was printed before; CR, BS and DEL move back over it. Unicode's
// bidirectional controls (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F,
// U+061C) reorder the text around them ("Trojan Source", CVE-2021-42574),
// and zero-width and other format characters hide text or make two
// different strings look the same. Hidden reports all of them; String shows
// each as an escape (\x1b, \r, \u202e) that a reader sees and a terminal
// does not obey, as git, less and journalctl do with what they print.
//
// Escaping is for display only: it is not reversible (a backslash is
// shown as itself), and what the API stores and returns is left exact
// (--json prints it exactly, as JSON escapes).
package visible
