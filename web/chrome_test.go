package web_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/chromedp"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/waitpar"
)

// chromiumEnv names the variable make test sets to the Makefile's
// CHROMIUM_SHELL, the headless shell `make chromium` installs: Debian's
// chromium-headless-shell, Chromium's headless shell, the same Blink and V8
// as the browser without its user interface (profile, extensions, the
// browser's own pages), run here directly rather than through /usr/bin's
// sh wrapper. The browser itself, /usr/bin/chromium in its headless mode,
// spent three times the CPU on the same tests (web's tests under -race: 79
// and 73 s of its processes' CPU against 23 and 24 s, the tests passing
// alike), starting a renderer process for nearly every page.
const chromiumEnv = "SIMRELAY_TEST_CHROMIUM"

// chromiumPath is the headless shell the tests run: chromiumEnv's value,
// or without it (go test ./web alone) CHROMIUM_SHELL's default as the
// Makefile sets it, the one place that names the path.
var chromiumPath = sync.OnceValue(func() string {
	if p := os.Getenv(chromiumEnv); p != "" {
		return p
	}
	mk, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(mk)) {
		if v, ok := strings.CutPrefix(line, "CHROMIUM_SHELL ?= "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
})

// browserTimeout bounds one browser test; every wait inside it polls the
// page against this deadline.
const browserTimeout = 60 * time.Second

// chromium is the one headless browser the package's tests share: starting
// it is the costly part of a browser test. Each test gets a tab in a browser
// context of its own (cookies, storage, cache), so tests stay as apart as
// with a browser each. TestMain stops it.
var chromium struct {
	once   sync.Once
	tab    context.Context // the first tab, which owns the browser
	cancel func()
	err    error
}

// TestMain runs twice as many parallel tests as there are cores: the browser
// tests spend most of their time waiting for Chromium, another process, to
// load and render a page (web's tests took 27 and 33 s with -parallel 4
// against 34 and 40 s with the default 2, in turn on a loaded 2-core machine).
func TestMain(m *testing.M) {
	waitpar.Default(2)
	code := storetest.Run(m)
	if chromium.cancel != nil {
		chromium.cancel()
	}
	os.Exit(code)
}

// startBrowser starts the shared browser with a fresh profile, which the
// allocator removes when the browser stops.
func startBrowser() {
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath()),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(actx)
	chromium.tab, chromium.cancel = tab, func() { cancelTab(); cancelAlloc() }
	// The first action starts the browser: without a deadline, which would
	// stop the browser itself (each test's actions get theirs in chrome).
	if err := chromedp.Do(tab); err != nil {
		chromium.err = fmt.Errorf("start chromium: %w", err)
	}
}

// chrome returns a tab of the shared headless Chromium in a new browser
// context. A failed test leaves a screenshot in testdata/artifacts (gitignored).
func chrome(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		t.Fatalf("no headless Chromium named: %s is unset, and ../Makefile sets no CHROMIUM_SHELL", chromiumEnv)
	}
	if _, err := exec.LookPath(path); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing: `make test` installs it (make chromium)", path)
		}
		t.Skipf("%s is missing: run `make chromium`", path)
	}
	chromium.once.Do(startBrowser)
	if chromium.err != nil {
		t.Fatal(chromium.err)
	}
	tab, cancelTab := chromedp.NewContext(chromium.tab, chromedp.WithNewBrowserContext())
	t.Cleanup(cancelTab)
	// The first action opens the tab: without a deadline, which would close
	// the tab itself (the actions get theirs below).
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	ctx, cancelTime := context.WithTimeout(tab, browserTimeout)
	t.Cleanup(cancelTime)
	t.Cleanup(func() {
		if t.Failed() {
			shot(t, tab, filepath.Join("testdata", "artifacts", strings.ReplaceAll(t.Name(), "/", "_")+".png"))
		}
	})
	return ctx
}

// shot saves a screenshot of the tab.
func shot(t *testing.T, tab context.Context, path string) {
	sctx, cancel := context.WithTimeout(tab, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot: %v", err)
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Logf("screenshot: %v", err)
		return
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Logf("screenshot: %v", err)
		return
	}
	t.Logf("screenshot saved: %s", path)
}

// do runs browser steps, one after the other, and fails the test on error.
//
// A step that acts on an element (a click, keys) finds it, then acts on it
// by its node id; if the page replaced the element in between (its script
// drew it anew, or the next page came), the browser answers "Could not find
// node with given id" before the step did anything: no mouse or key event
// was sent, as the node is looked up before them. Such a step is run again,
// finding the element anew, until it gets past that or half the test's
// time is spent. Only that step runs again, never the ones before it.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	for _, step := range steps {
		retries, err := again(ctx, step)
		if retries > 0 {
			// Logged, so that a page that keeps redrawing an element by
			// mistake shows in the test's output rather than only as time.
			t.Logf("%s: the page replaced a step's element after the step found it; the step ran again (%d)", what, retries)
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// again runs a step, once more each time it fails on an element the page
// replaced after the step found it, within half the test's time; retries
// says how many more times it ran.
func again(ctx context.Context, step chromedp.Action[chromedp.Void]) (retries int, err error) {
	deadline := time.Now().Add(browserTimeout / 2)
	for {
		err = chromedp.Do(ctx, step)
		if err == nil || !nodeGone(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return retries, err
		}
		retries++
		time.Sleep(20 * time.Millisecond)
	}
}

// nodeGone tells the browser's answer to a node id whose element left the
// page after it was found (-32000: "Could not find node with given id",
// "No node with given id found").
func nodeGone(err error) bool {
	var e *cdproto.Error
	return errors.As(err, &e) && (e.Message == "Could not find node with given id" || e.Message == "No node with given id found")
}

// field is the CSS selector of an input by its name (names hold dots).
func field(name string) chromedp.CSS { return chromedp.CSS(fmt.Sprintf(`[name=%q]`, name)) }

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// waitFor polls a JavaScript predicate in the page until it holds. Each
// check is one short evaluation, so a navigation between two checks (a form
// that redirects) costs one failed check, not the wait.
func waitFor(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	if err := waitUntil(ctx, js); err != nil {
		t.Fatalf("wait for %s: %v", what, err)
	}
}

// waitUntil is waitFor's poll, for a goroutine of the test: it says when
// the predicate did not hold in time.
func waitUntil(ctx context.Context, js string) error {
	deadline := time.Now().Add(browserTimeout / 2)
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ok, err := chromedp.Run(cctx, chromedp.Evaluate[bool](`(function(){try{return !!(`+js+`)}catch(e){return false}})()`))
		cancel()
		if err == nil && ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("not within %s (last error: %v)", browserTimeout/2, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitText waits until the element sel holds want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	waitFor(t, ctx, fmt.Sprintf("%q in %s", want, sel),
		fmt.Sprintf(`(function(){var e=document.querySelector(%q);return !!e && e.textContent.indexOf(%q)>=0;})()`, sel, want))
}

// fill types into the inputs named by the keys.
func fill(values map[string]string) []chromedp.Action[chromedp.Void] {
	var out []chromedp.Action[chromedp.Void]
	for name, v := range values {
		out = append(out, chromedp.SendKeys(field(name), v))
	}
	return out
}

// signInUI signs in through the page.
func signInUI(t *testing.T, ctx context.Context, base, email, password string) {
	t.Helper()
	do(t, ctx, "sign in", append(append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(base + "/console/signin")},
		fill(map[string]string{"email": email, "password": password})...),
		chromedp.Click(chromedp.CSS(`main button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`nav[aria-label=Console]`)))...)
}

// TestBrowserTestsShareOneChromiumNotItsSessions: the browser tests share one
// Chromium, yet a session signed in by one test is not another's, though
// cookies ignore the port that tells the tests' servers apart.
func TestBrowserTestsShareOneChromiumNotItsSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	signedIn, other := chrome(t), chrome(t)
	if chromedp.FromContext(signedIn).Browser != chromedp.FromContext(other).Browser {
		t.Fatal("two tests' tabs run in two browsers, want one shared Chromium")
	}
	signInUI(t, signedIn, e.url, "ada@acme.test", "Correct1horse")
	do(t, other, "open the console", chromedp.Navigate(e.url+"/console/"))
	waitFor(t, other, "the sign-in form", `location.pathname === '/console/signin' && !!document.querySelector('[name=password]')`)
	if got := eval[int](t, other, `document.querySelectorAll('nav[aria-label=Console]').length`); got != 0 {
		t.Fatalf("the other tab shows the console's navigation (%d): it shares the session", got)
	}
}
