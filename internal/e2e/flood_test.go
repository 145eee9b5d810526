package e2e_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// floodEnv names the environment variable that makes this test binary a
// flooder (TestMain runs flood instead of the tests): it opens up to
// GANDIVA_FLOOD_N connections to the address, sends GET /healthz on each
// and keeps them open, idle, until its standard input closes (with
// GANDIVA_FLOOD_STALL set, connections that never read: floodStalled).
const floodEnv = "GANDIVA_FLOOD_ADDR"

// flood is the flooder process's body.
func flood() {
	if os.Getenv("GANDIVA_FLOOD_STALL") != "" {
		floodStalled()
	}
	addr := os.Getenv(floodEnv)
	want, _ := strconv.Atoi(os.Getenv("GANDIVA_FLOOD_N"))
	// Go raised this process's soft file limit to the hard one; respect it.
	var r syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r)
	n := min(want, int(r.Cur)-64)
	t0 := time.Now()
	var mu sync.Mutex
	var conns []net.Conn
	var opened, failed atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				c, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					failed.Add(1)
					continue
				}
				io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: flood\r\n\r\n")
				opened.Add(1)
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Printf("opened %d failed %d limit %d took %s\n", opened.Load(), failed.Load(), r.Cur, time.Since(t0).Round(time.Millisecond))
	io.Copy(io.Discard, os.Stdin) // hold them until told
	os.Exit(0)
}

// TestConnectionFlood: more idle connections than the server can hold open
// (20,000 from a separate process, or as many as its file limit allows,
// each having sent GET /healthz) leave /v1/whoami answering within a
// second on a fresh connection (about 20,000 such connections once made
// the API stop answering, accept4: too many open files). The server
// (a `gandiva server` process) caps its connections below its file limit
// and closes the longest idle one to make room.
func TestConnectionFlood(t *testing.T) {
	p := startServerProc(t, "--policy", "fifo")
	addr := strings.TrimPrefix(p.url, "http://")
	tok := p.token("admin.token")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), floodEnv+"="+addr, "GANDIVA_FLOOD_N=20000")
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()

	whoami := func() (time.Duration, error) {
		cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
		rq, _ := http.NewRequest("GET", p.url+"/v1/whoami", nil)
		rq.Header.Set("Authorization", "Bearer "+tok)
		start := time.Now()
		resp, err := cl.Do(rq)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("status %d", resp.StatusCode)
		}
		return time.Since(start), nil
	}
	// During the flood: observed, for the log.
	stopWatch := make(chan struct{})
	var during []time.Duration
	var duringErrs int
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if d, err := whoami(); err == nil {
				during = append(during, d)
			} else {
				duringErrs++
			}
		}
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	close(stopWatch)
	<-watched
	if err != nil {
		t.Fatalf("the flooder: %v", err)
	}
	var opened, failed, limit int
	var took string
	fmt.Sscanf(line, "opened %d failed %d limit %d took %s", &opened, &failed, &limit, &took)
	evicted, _ := strconv.Atoi(metricLabel(t, p.url, tok, "gandiva_api_connections_closed_total", `why="evicted"`))
	t.Logf("flooder: %d connections opened in %s (%d failed, its file limit %d); the server evicted %d; during the flood whoami took %v (%d errors)",
		opened, took, failed, limit, evicted, during, duringErrs)
	if evicted == 0 {
		t.Fatalf("the flood never reached the server's cap (%d connections opened): the test shows nothing", opened)
	}
	// Every connection the flood holds is idle: fresh requests are served.
	for i := 0; i < 5; i++ {
		d, err := whoami()
		if err != nil {
			t.Fatalf("whoami after the flood: %v", err)
		}
		if d > time.Second {
			t.Fatalf("whoami after the flood took %v, want under 1 s", d)
		}
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid))
	t.Logf("the server holds %d file descriptors", len(fds))
	if _, err := http.Get(p.url + "/healthz"); err != nil {
		t.Fatalf("healthz after the flood: %v", err)
	}
}

// metricLabel reads one labelled sample of a metric from /metrics.
func metricLabel(t *testing.T, url, token, name, label string) string {
	t.Helper()
	rq, _ := http.NewRequest("GET", url+"/metrics", nil)
	rq.Header.Set("Authorization", "Bearer "+token)
	cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := cl.Do(rq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, name+"{") && strings.Contains(l, label) {
			f := strings.Fields(l)
			return f[len(f)-1]
		}
	}
	return "(missing)"
}

// stalledConn dials addr with the smallest receive buffer the kernel
// allows and sends it 32 pipelined GETs of the dashboard's largest file (no
// token needed; some 900 KiB of answers in all), never reading an answer:
// the server's writes to it stall once the buffers are full.
func stalledConn(addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			// (a small segment size too, or loopback's 64 KiB segments
			// let the server's send buffer grow to megabytes)
			serr = errors.Join(syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024),
				syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, 536))
		}); err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, strings.Repeat("GET /ui/assets/timeline.js HTTP/1.1\r\nHost: flood\r\n\r\n", 32)); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// floodStalled is the flooder's body in the never-reading mode: it opens
// GANDIVA_FLOOD_N connections that never read (stalledConn), prints a
// line, and then, until its standard input closes, opens another every
// 25 ms and closes its own oldest, so that the server's cap stays full of
// them however many it closes.
func floodStalled() {
	addr := os.Getenv(floodEnv)
	n, _ := strconv.Atoi(os.Getenv("GANDIVA_FLOOD_N"))
	var held []net.Conn
	failed := 0
	t0 := time.Now()
	for len(held) < n && failed < n {
		c, err := stalledConn(addr)
		if err != nil {
			failed++
			continue
		}
		held = append(held, c)
	}
	fmt.Printf("opened %d failed %d took %s\n", len(held), failed, time.Since(t0).Round(time.Millisecond))
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	for {
		select {
		case <-done:
			os.Exit(0)
		case <-time.After(25 * time.Millisecond):
		}
		if c, err := stalledConn(addr); err == nil {
			held[0].Close()
			held = append(held[1:], c)
		}
	}
}

// TestStalledFlood: a `gandiva server --max-conns 200` whose
// connections are all taken by clients that send requests and never read
// the answers (300 of them, from a separate process that keeps opening
// more) still answers an admin's /v1/whoami on a fresh connection, 100
// times in a row. (It was refused: a connection whose answer could not be
// written counted as a request in progress, never closed to make room.)
// The latencies are logged as a table; with GANDIVA_MEASURE=1, at least
// 99 of the 100 must be under 1 s (docs/PERFORMANCE.md).
func TestStalledFlood(t *testing.T) {
	p := startServerProc(t, "--policy", "fifo", "--max-conns", "200")
	addr := strings.TrimPrefix(p.url, "http://")
	tok := p.token("admin.token")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), floodEnv+"="+addr, "GANDIVA_FLOOD_N=300", "GANDIVA_FLOOD_STALL=1")
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the flooder: %v", err)
	}
	t.Logf("flooder: %s", strings.TrimSpace(line))
	cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	var took []time.Duration
	var errs []string
	for i := 0; i < 100; i++ {
		time.Sleep(100 * time.Millisecond) // (the flood refills the cap meanwhile)
		rq, _ := http.NewRequest("GET", p.url+"/v1/whoami", nil)
		rq.Header.Set("Authorization", "Bearer "+tok)
		start := time.Now()
		resp, err := cl.Do(rq)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode != 200 {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		took = append(took, time.Since(start))
	}
	if len(errs) > 0 {
		t.Fatalf("%d of 100 whoami probes failed with the cap full of never-reading connections: %v", len(errs), errs[:min(5, len(errs))])
	}
	evicted := metricLabel(t, p.url, tok, "gandiva_api_connections_closed_total", `why="evicted"`)
	refused := metricLabel(t, p.url, tok, "gandiva_api_connections_closed_total", `why="refused"`)
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	under := sort.Search(len(took), func(i int) bool { return took[i] >= time.Second })
	pct := func(q float64) time.Duration {
		if len(took) == 0 {
			return 0
		}
		return took[min(len(took)-1, int(q*float64(len(took))))].Round(100 * time.Microsecond)
	}
	t.Logf("\n| probes | answered | within 1 s | median | 99th percentile | slowest | connections evicted | refused |\n"+
		"|---|---|---|---|---|---|---|---|\n| 100 | %d | %d | %v | %v | %v | %s | %s |", len(took), under, pct(0.5), pct(0.99), pct(1), evicted, refused)
	if ev, _ := strconv.Atoi(evicted); ev < 100 {
		t.Fatalf("only %s connections evicted: the flood never filled the cap, the test shows nothing", evicted)
	}
	if os.Getenv("GANDIVA_MEASURE") != "" && under < 99 {
		t.Fatalf("%d of 100 probes answered within 1 s, want at least 99", under)
	}
}
