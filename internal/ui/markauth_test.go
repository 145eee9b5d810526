package ui_test

import (
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/ui"
)

// A dashboard's authenticated call marks its connection authenticated, as
// the /v1 API's do: the server (api.NewHTTPServer with an unauthenticated
// share of its cap) closes unauthenticated connections first, whatever
// they are doing, so a flood of anonymous connections pushed out a signed
// in dashboard's as if it were one of them.
func TestDashboardCallMarksConnectionAuthenticated(t *testing.T) {
	sc := runScenario(t, "gandiva", 2, 40, 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, lim := api.NewHTTPServer(ui.Handler(sc.memory("gandiva"), testTokens, ui.Options{}), ln,
		api.ServerOptions{MaxConns: 8, UnauthenticatedShare: 0.75})
	go srv.Serve(lim)
	defer srv.Close()
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}} // (one kept-alive connection)
	defer cl.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/ui/api/summary", nil)
	req.Header.Set("Authorization", "Bearer admin-token")
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /ui/api/summary as admin: %d", resp.StatusCode)
	}
	if st := lim.Stats(); st.Open != 1 || st.Unauthenticated != 0 {
		t.Fatalf("after an authenticated dashboard call: %d connections open, %d counted unauthenticated (want 1, 0)", st.Open, st.Unauthenticated)
	}
}
