package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// servePprof serves Go's profiles (/debug/pprof/: CPU, heap, goroutines)
// on addr, which must be a loopback address: the profiles show the
// process's memory and stacks and have no authentication. Off (a no-op
// stop) when addr is empty.
func servePprof(ctx context.Context, flag, addr string, log *slog.Logger) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	if err := loopbackAddr(addr); err != nil {
		return nil, fmt.Errorf("%s %q: %w", flag, addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", flag, addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof server stopped", "err", err)
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	go func() { <-ctx.Done(); srv.Close() }()
	log.Info("pprof", "url", "http://"+ln.Addr().String()+"/debug/pprof/")
	return func() { cancel(); <-done }, nil
}

// loopbackAddr says whether host:port names a loopback host (127.0.0.0/8,
// ::1 or localhost).
func loopbackAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return errors.New("not a loopback address (the profiles have no authentication): use 127.0.0.1:PORT")
}
