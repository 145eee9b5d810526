package e2e_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
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
// and keeps them open, idle, until its standard input closes.
const floodEnv = "GANDIVA_FLOOD_ADDR"

// flood is the flooder process's body.
func flood() {
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
// second on a fresh connection (issue 12: about 20,000 such connections
// made the API stop answering, accept4: too many open files). The server
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
