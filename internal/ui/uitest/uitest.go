// Package uitest drives the dashboard and the HTML report in a headless
// Chromium for tests (internal/ui's and internal/e2e's): Debian's chromium
// package, through the DevTools protocol (chromedp). Only tests import it;
// it is not part of the gandiva binary.
//
// The tests skip when Chromium is missing, except under CI=true, where they
// fail. GANDIVA_CHROMIUM names another binary. With GANDIVA_SCREENSHOTS=1,
// Screenshot saves the page under docs/.
package uitest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Chromium returns the path of the Chromium binary, or skips the test (fails
// it under CI=true) when there is none.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, p := range []string{os.Getenv("GANDIVA_CHROMIUM"), "/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("Chromium not found: .ci/run installs it with apt-get install -y chromium")
	}
	t.Skip("Chromium not found (apt-get install chromium); skipping the browser tests")
	return ""
}

// Browser starts a headless Chromium with an empty profile and no
// background networking (on a closed network its connections are
// refused), and returns a context for chromedp.Run, valid for timeout. The
// page's exceptions and console errors fail the test at its end.
func Browser(t testing.TB, timeout time.Duration) context.Context {
	t.Helper()
	// a new, empty profile (not t.TempDir: Chromium may still be writing
	// there as the test's clean-up removes it)
	profile, err := os.MkdirTemp("", "gandiva-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Chromium(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1600, 1100),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	ctx, cancelT := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA(); os.RemoveAll(profile) })
	Watch(t, ctx)
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx
}

// Tab opens another tab of ctx's browser (its own page, sharing nothing
// with the first but the browser process), watched as Browser's.
func Tab(t testing.TB, ctx context.Context) context.Context {
	t.Helper()
	tab, cancel := chromedp.NewContext(ctx)
	t.Cleanup(cancel)
	Watch(t, tab)
	if err := chromedp.Run(tab); err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	return tab
}

// Watch fails the test, at its end, for every exception thrown and every
// console error in ctx's page.
func Watch(t testing.TB, ctx context.Context) {
	var mu sync.Mutex
	var problems []string
	chromedp.ListenTarget(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+e.ExceptionDetails.Error())
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.APITypeError {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				problems = append(problems, "console.error: "+strings.Join(parts, " "))
			}
		}
	})
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range problems {
			t.Errorf("in the page: %s", p)
		}
	})
}

// Run runs chromedp actions, failing the test on an error.
func Run(t testing.TB, ctx context.Context, actions ...chromedp.Action) {
	t.Helper()
	if err := chromedp.Run(ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

// Eval evaluates a JavaScript expression and decodes its JSON value into out.
func Eval(t testing.TB, ctx context.Context, expr string, out any) {
	t.Helper()
	var raw string
	Run(t, ctx, chromedp.Evaluate(`JSON.stringify(`+expr+`)`, &raw))
	if err := json.Unmarshal([]byte(raw), out); err != nil {
		t.Fatalf("%s: %v (%q)", expr, err, raw)
	}
}

// WaitReady waits until the page has drawn its data (body[data-ready]).
func WaitReady(t testing.TB, ctx context.Context) {
	t.Helper()
	Run(t, ctx, chromedp.WaitVisible(`body[data-ready="1"]`, chromedp.ByQuery))
}

// Screenshot saves the whole page as docs/NAME under root (the module's
// root, relative to the test's directory) when GANDIVA_SCREENSHOTS is set.
func Screenshot(t testing.TB, ctx context.Context, root, name string) {
	t.Helper()
	if os.Getenv("GANDIVA_SCREENSHOTS") == "" {
		return
	}
	var png []byte
	Run(t, ctx, chromedp.FullScreenshot(&png, 100))
	path := filepath.Join(root, "docs", name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("saved %s", path)
}
