package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/term"
)

// openPTY opens a pseudo-terminal; what is written to tty is read from
// master. The tty is raw (no \r added to line feeds).
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatalf("unlockpt: %v", e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatalf("ptsname: %v", e)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := term.MakeRaw(int(s.Fd())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

// TestLogsToTerminal: a job's log printed to a terminal shows its escape
// sequences, carriage returns and bidi characters escaped, lines and tabs
// kept; --raw, and a pipe, get its bytes as they are.
func TestLogsToTerminal(t *testing.T) {
	hs := fakeAPI(t)
	logs := func(out *os.File, extra ...string) {
		t.Helper()
		root := newRoot()
		root.SetOut(out)
		root.SetErr(io.Discard)
		root.SetArgs(append([]string{"logs", "j1", "--server", hs.URL, "--token", "gdv_test"}, extra...))
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
	}
	readAll := func(master, tty *os.File) string {
		tty.Close()
		var b bytes.Buffer
		io.Copy(&b, master) // (ends with EIO once the tty is closed and drained)
		return b.String()
	}
	m, tty := openPTY(t)
	logs(tty)
	got := readAll(m, tty)
	want := "step 1\n" + `\x1b]0;pwned\a\x1b[2J\rX\bY` + "\n" + "Z\tW" + `\x7f\u009b31m\u202eevil\u2066\u200b` + "\nstep 2\t" + `\xe2\x80`
	if got != want {
		t.Fatalf("logs to a terminal:\n got %q\nwant %q", got, want)
	}
	m, tty = openPTY(t)
	logs(tty, "--raw")
	if got := readAll(m, tty); got != "step 1\n"+evil+"\nstep 2\t\xe2\x80" {
		t.Fatalf("logs --raw to a terminal: %q", got)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	logs(w)
	w.Close()
	data, _ := io.ReadAll(r)
	if string(data) != "step 1\n"+evil+"\nstep 2\t\xe2\x80" {
		t.Fatalf("logs to a pipe: %q", data)
	}
}
