package console_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// Browser tests: the console driven in Chromium (Debian's chromium; .ci/run
// installs it). One browser serves the whole test binary; each test opens
// its own browser context (its own cookies). Tests wait for DOM conditions,
// never for time. With CI set, a browser that cannot start fails the test;
// without CI a machine without chromium skips them.

var browserOnce struct {
	sync.Once
	ctx    context.Context
	cancel func()
	err    error
}

var errNoBrowser = errors.New("no chromium, chromium-browser or google-chrome on PATH")

func TestMain(m *testing.M) {
	code := m.Run()
	if browserOnce.cancel != nil {
		browserOnce.cancel()
	}
	os.Exit(code)
}

func findBrowser() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// tab returns a fresh tab in a browser context of its own, closed when the
// test ends; every action on it gives up after three minutes (a loaded
// CI machine is slow, never stuck).
func tab(t *testing.T) context.Context {
	t.Helper()
	browserOnce.Do(func() {
		path := findBrowser()
		if path == "" {
			browserOnce.err = errNoBrowser
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1280, 900),
			// Headless Chromium is the whole browser: each window (one per
			// test's browser context) preloads two WebUI renderers for an
			// omnibox popup no test opens, which cost more CPU than the
			// pages tested. The first two names are chromedp's defaults.
			chromedp.Flag("disable-features", "Translate,BlinkGenPropertyTrees,WebUIOmniboxPopup,WebUIOmniboxAimPopup"))
		if os.Geteuid() == 0 {
			opts = append(opts, chromedp.NoSandbox)
		}
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(alloc)
		if err := chromedp.Do(ctx); err != nil {
			cancel()
			cancelAlloc()
			browserOnce.err = fmt.Errorf("start %s: %w", path, err)
			return
		}
		browserOnce.ctx, browserOnce.cancel = ctx, func() { cancel(); cancelAlloc() }
	})
	if err := browserOnce.err; err != nil {
		if errors.Is(err, errNoBrowser) && os.Getenv("CI") == "" {
			t.Skip("browser tests need chromium (apt-get install chromium); CI installs it")
		}
		t.Fatalf("browser: %v", err)
	}
	ctx, cancel := chromedp.NewContext(browserOnce.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	tctx, tcancel := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(tcancel)
	return tctx
}

// do runs actions, failing the test with what was being done.
func do(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v\npage:\n%s", what, err, pageText(ctx))
	}
}

func pageText(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
	return s
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// waitFor waits until the page makes js true (a DOM condition). A page
// that navigates meanwhile (a form submitted) ends one poll; the next poll
// asks the new page.
func waitFor(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(50*time.Millisecond),
			chromedp.WithPollingTimeout(5*time.Second)))
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("waiting for %s: %v\npage:\n%s", what, err, pageText(ctx))
		}
	}
}

// title waits for a page whose <title> starts with prefix.
func waitTitle(t *testing.T, ctx context.Context, prefix string) {
	t.Helper()
	waitFor(t, ctx, "the page "+prefix, fmt.Sprintf(`document.readyState === "complete" && document.title.startsWith(%q)`, prefix))
}

// accessible checks the page's accessibility basics: every visible form
// control has a label (or an aria-label), every button a name, nothing
// is taken out of (or forced into) the keyboard's tab order, and no
// element handles clicks that is not a link or a button.
func accessible(t *testing.T, ctx context.Context) {
	t.Helper()
	bad := eval[[]string](t, ctx, `(() => {
		const bad = [];
		for (const el of document.querySelectorAll("input:not([type=hidden]), select, textarea")) {
			if (!(el.labels && el.labels.length) && !el.getAttribute("aria-label")) bad.push("no label: " + el.outerHTML);
		}
		for (const el of document.querySelectorAll("button, a[href]")) {
			if (!el.textContent.trim() && !el.getAttribute("aria-label")) bad.push("no name: " + el.outerHTML);
		}
		for (const el of document.querySelectorAll("[tabindex], [onclick], [onkeydown]")) bad.push("keyboard: " + el.outerHTML);
		if (!document.documentElement.lang) bad.push("no lang");
		if (!document.querySelector("h1")) bad.push("no h1");
		return bad;
	})()`)
	if len(bad) > 0 {
		t.Errorf("accessibility on %s:\n%s", pageText(ctx)[:60], strings.Join(bad, "\n"))
	}
}

// signIn signs in with token by keyboard only: type it, press Enter.
func signIn(t *testing.T, ctx context.Context, s *site, token string) {
	t.Helper()
	do(t, ctx, "open the sign-in page", chromedp.Navigate(s.url+"/console/"))
	waitTitle(t, ctx, "Sign in")
	accessible(t, ctx)
	screenshot(t, ctx, "sign-in")
	do(t, ctx, "type the token and press Enter", chromedp.SendKeys(chromedp.ID("token"), token+kb.Enter))
	waitTitle(t, ctx, "Needs attention")
}

// click clicks the element css selects and waits for the page titled next.
// The element is found and clicked in one step in the page: lists refresh
// themselves every few hundred milliseconds here, and a node found in one
// step may be gone in the next.
func click(t *testing.T, ctx context.Context, css, next string) {
	t.Helper()
	waitFor(t, ctx, css, fmt.Sprintf(`!!document.querySelector(%q)`, css))
	do(t, ctx, "click "+css, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).click()`, css)))
	waitTitle(t, ctx, next)
}

// screenshot writes the page to docs/console/name.png when
// AGENTOWL_WRITE_SCREENSHOTS is set (docs/console.md shows them).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv("AGENTOWL_WRITE_SCREENSHOTS") == "" {
		return
	}
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "docs", "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

// cookie returns the browser's cookie of name for the console.
func browserCookie(t *testing.T, ctx context.Context, s *site, name string) *network.Cookie {
	t.Helper()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{s.url + "/console/"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Cookies {
		if c.Name == name {
			return c
		}
	}
	return nil
}
