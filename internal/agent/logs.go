package agent

import (
	"crypto/subtle"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
)

// logHandler serves GET /logs?job=&attempt=&rank=&tail=&follow= to the
// server, which presents the key the agent gave it at registration; every
// answer to it carries the proof (api.LogProof) of that key for the
// server's nonce, without which the server relays nothing.
func (a *Agent) logHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /logs", func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+a.logKey)) != 1 {
			http.Error(w, "invalid key", http.StatusUnauthorized)
			return
		}
		// (the server relays only answers that prove they are ours)
		w.Header().Set(api.LogProofHeader, api.LogProof(a.logKey, r.Header.Get(api.LogNonceHeader), r.URL.RawQuery))
		q := r.URL.Query()
		attempt, err1 := strconv.ParseInt(q.Get("attempt"), 10, 64)
		rank, err2 := strconv.Atoi(q.Get("rank"))
		tail, _ := strconv.ParseInt(q.Get("tail"), 10, 64)
		follow, _ := strconv.ParseBool(q.Get("follow"))
		if q.Get("job") == "" || err1 != nil || err2 != nil {
			http.Error(w, "job, attempt and rank are required", http.StatusBadRequest)
			return
		}
		k := key{q.Get("job"), attempt, rank}
		a.mu.Lock()
		path := a.logPath(k)
		a.mu.Unlock()
		f, err := os.Open(path)
		if err != nil {
			http.Error(w, "no log", http.StatusNotFound)
			return
		}
		defer f.Close()
		if tail > 0 {
			if st, err := f.Stat(); err == nil && st.Size() > tail {
				f.Seek(st.Size()-tail, io.SeekStart)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		flusher, _ := w.(http.Flusher)
		for {
			if _, err := io.Copy(w, f); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
			if !follow || !a.running(k) {
				io.Copy(w, f)
				return
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	return mux
}

// running reports whether the attempt's process is alive here.
func (a *Agent) running(k key) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.workers[k]
	return ok
}
