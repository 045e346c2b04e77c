package console_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/agentowl/agentowl/internal/store/storetest"
)

// Accessibility, checked by a tool: every console view, signed in with
// real data, runs axe-core (Deque's accessibility engine, from npm, pinned
// by version and by the SHA-256 of the file) in Chromium at 1280×800 and
// 390×844. No violation of impact serious or critical is allowed; at 390
// px no page scrolls sideways, and every link and button is at least 44×44
// CSS pixels or answers clicks on a 44×44 square around its centre.
//
// axe-core is installed like chromium is found: from the machine, here
// with npm into the user's cache directory (outside the repository), once.
// With CI set, failing to get it fails the test; otherwise it skips. The
// console's Content-Security-Policy forbids injected scripts, so axe goes
// in through DevTools (Page.addScriptToEvaluateOnNewDocument), which the
// page's CSP does not govern.

const (
	axeVersion = "4.10.3"
	// axeSHA256 is the SHA-256 of axe-core 4.10.3's axe.min.js.
	axeSHA256 = "880970c081707360e64f34cea25ff91892f5bc95675b0776925b9709dd8a68bb"
)

var axeOnce struct {
	sync.Once
	src string
	err error
}

// axeSource returns axe.min.js, installing it with npm when the cache has
// no verified copy.
func axeSource(t *testing.T) string {
	t.Helper()
	axeOnce.Do(func() { axeOnce.src, axeOnce.err = installAxe() })
	if err := axeOnce.err; err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("accessibility tests need axe-core %s from npm: %v", axeVersion, err)
		}
		t.Fatalf("axe-core %s: %v", axeVersion, err)
	}
	return axeOnce.src
}

func installAxe() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "agentowl-test", "axe-core-"+axeVersion)
	file := filepath.Join(dir, "node_modules", "axe-core", "axe.min.js")
	if src, err := readVerified(file); err == nil {
		return src, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", errors.New("no npm on PATH (apt-get install npm)")
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	// Install into a fresh directory and move it in place, so a
	// concurrent test binary never reads a half-written copy.
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "axe-install-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", tmp, "--no-save", "--no-package-lock", "--no-audit", "--no-fund",
		"--ignore-scripts", "--loglevel=error", "axe-core@"+axeVersion)
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm install axe-core@%s: %v\n%s", axeVersion, err, out)
	}
	src, err := readVerified(filepath.Join(tmp, "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		return "", err
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, os.ErrExist) {
		return src, nil // another binary installed it meanwhile; ours is verified too
	}
	return src, nil
}

func readVerified(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != axeSHA256 {
		return "", fmt.Errorf("%s is not axe-core %s (SHA-256 %x)", file, axeVersion, sum)
	}
	return string(b), nil
}

// a11yTab is a browser tab with axe injected into every page it opens.
func a11yTab(t *testing.T, width, height int64) context.Context {
	t.Helper()
	src := axeSource(t)
	ctx := tab(t)
	if _, err := chromedp.Call(ctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: src}); err != nil {
		t.Fatalf("inject axe-core: %v", err)
	}
	opts := []chromedp.EmulateViewportOption{}
	if width < 600 {
		opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulatePortrait)
	}
	do(t, ctx, "set the viewport", chromedp.EmulateViewport(width, height, opts...))
	return ctx
}

// axeViolations runs axe-core on the page and returns its serious and
// critical violations, each with up to five of the elements at fault.
func axeViolations(t *testing.T, ctx context.Context) []string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(async () => {
		if (typeof axe === "undefined") return ["axe-core is not loaded on this page"];
		const r = await axe.run(document, {resultTypes: ["violations"]});
		return r.violations.filter(v => v.impact === "serious" || v.impact === "critical").map(v =>
			v.id + " (" + v.impact + "): " + v.help + "\n      " +
			v.nodes.slice(0, 5).map(n => n.target.join(" ") + ": " + (n.failureSummary || "").replace(/\s+/g, " ")).join("\n      "));
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("run axe-core: %v", err)
	}
	return v
}

// phoneProblems checks a page at phone width: no sideways scrolling, and
// every link, button and summary at least 44×44 CSS pixels or with a
// 44×44 hit area around its centre (every point of that square, sampled at
// its corners and edges, clicks it).
func phoneProblems(t *testing.T, ctx context.Context) []string {
	t.Helper()
	return eval[[]string](t, ctx, `(() => {
		const bad = [];
		const describe = el => {
			let s = el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className ? "." + String(el.className).trim().replace(/\s+/g, ".") : "");
			const text = (el.getAttribute("aria-label") || el.textContent || "").trim().replace(/\s+/g, " ").slice(0, 40);
			return s + ' "' + text + '"';
		};
		const vw = window.innerWidth;
		if (document.documentElement.scrollWidth > vw) {
			const wide = [];
			for (const el of document.querySelectorAll("body *")) {
				const r = el.getBoundingClientRect();
				if (r.width > 0 && r.right > vw + 0.5) wide.push(describe(el) + " to x=" + Math.round(r.right));
			}
			bad.push("scrolls sideways (" + document.documentElement.scrollWidth + " > " + vw + "): " + wide.slice(-5).join(", "));
		}
		const h = 21.5;
		for (const el of document.querySelectorAll("a[href], button, input[type=submit], input[type=button], input[type=reset], summary")) {
			if (!el.getClientRects().length || getComputedStyle(el).visibility === "hidden") continue;
			let r = el.getBoundingClientRect();
			if (r.width >= 44 && r.height >= 44) continue;
			el.scrollIntoView({block: "center", inline: "center"});
			r = el.getBoundingClientRect();
			const cx = r.left + r.width / 2, cy = r.top + r.height / 2;
			let ok = true;
			for (const [dx, dy] of [[-h, -h], [0, -h], [h, -h], [-h, 0], [h, 0], [-h, h], [0, h], [h, h]]) {
				const hit = document.elementFromPoint(cx + dx, cy + dy);
				if (!hit || !(hit === el || el.contains(hit))) { ok = false; break; }
			}
			if (!ok) bad.push("target smaller than 44×44: " + describe(el) + " " + Math.round(r.width) + "×" + Math.round(r.height));
		}
		window.scrollTo(0, 0);
		return bad;
	})()`)
}

// a11yCheck checks the page shown now, named what.
func a11yCheck(t *testing.T, ctx context.Context, what string, phone bool) {
	t.Helper()
	waitFor(t, ctx, what+" loaded", `document.readyState === "complete" && typeof axe !== "undefined"`)
	problems := axeViolations(t, ctx)
	if phone {
		problems = append(problems, phoneProblems(t, ctx)...)
	}
	if len(problems) > 0 {
		t.Errorf("%s (%s):\n  %s", what, eval[string](t, ctx, `location.pathname`), strings.Join(problems, "\n  "))
	}
}

// a11ySite is a tenant with every kind of thing the views show: an
// endpoint with a binding, a runtime credential that reported, a
// runtime question, an AAP approval request, a policy, a member, their
// conversation, work and notices.
func a11ySite(t *testing.T) (*cfgSite, map[string]string) {
	t.Helper()
	s := startSettings(t, storetest.Backends(t)[0])
	ids := map[string]string{}
	ids["approval"] = s.request(s.instanceCred, refund("The customer was charged twice for order A-1234."))
	cb := map[string]any{"version": "agent-work.v1", "callback_id": s.work + ":q", "work_id": s.work, "sequence": 2, "status": "needs_input",
		"occurred_at": time.Date(2026, 9, 16, 12, 1, 0, 0, time.UTC).Format(time.RFC3339), "requests": []any{map[string]any{"id": "account",
			"revision": 1, "kind": "question", "prompt": "Which account should the refund go to? " + hostile, "allowed_decisions": []any{"answer"},
			"expires_at": time.Date(2026, 9, 16, 12, 40, 0, 0, time.UTC).Format(time.RFC3339)}}}
	s.must(http.StatusOK, http.MethodPost, "/runtime/v1/work/"+s.work+"/callbacks", s.cred, cb)
	for _, it := range s.must(http.StatusOK, http.MethodGet, "/api/v1/tenants/default/attention", s.admin, nil)["items"].([]any) {
		it := it.(map[string]any)
		ids["attention-"+it["kind"].(string)] = it["id"].(string)
	}
	conv := s.must(http.StatusOK, http.MethodGet, "/api/v1/tenants/default/conversations", s.admin, nil)["items"].([]any)
	ids["conversation"] = conv[0].(map[string]any)["id"].(string)
	for _, k := range []string{"attention-question", "attention-approval"} {
		if ids[k] == "" {
			t.Fatalf("no %s item in %v", k, ids)
		}
	}
	return s, ids
}

// a11yStep is one view to check: opened at path, or, with press set,
// the page that pressing that button on path leads to (a confirmation).
type a11yStep struct{ what, path, press string }

// TestBrowserAccessibility runs the checks on every view at both sizes.
// The views are checked in groups, each in a tab of its own.
func TestBrowserAccessibility(t *testing.T) {
	t.Parallel()
	s, ids := a11ySite(t)
	const tp = "/console/t/default"
	link := s.must(http.StatusCreated, http.MethodPost, "/api/v1/tenants/default/console-login-links", s.admin, nil)["url"].(string)
	groups := []struct {
		name      string
		signedOut bool
		steps     []a11yStep
	}{
		{"signed out", true, []a11yStep{
			{"the sign-in page", "/console/sign-in", ""},
			{"a deep link signed out", tp + "/approvals/" + ids["approval"], ""},
			{"a login link", strings.TrimPrefix(link, s.url), ""},
			{"an unknown page signed out", "/console/nope", ""},
		}},
		{"decisions", false, []a11yStep{
			{"Needs attention", tp + "/attention", ""},
			{"a question", tp + "/attention/" + ids["attention-question"], ""},
			{"an approval in Needs attention", tp + "/attention/" + ids["attention-approval"], ""},
			{"the decision's confirmation", tp + "/attention/" + ids["attention-approval"], "#approve"},
			{"Approvals", tp + "/approvals", ""},
			{"an approval request", tp + "/approvals/" + ids["approval"], ""},
		}},
		{"work", false, []a11yStep{
			{"Agent work", tp + "/work", ""},
			{"a work", tp + "/work/" + s.work, ""},
			{"Conversations", tp + "/conversations", ""},
			{"a conversation", tp + "/conversations/" + ids["conversation"], ""},
			{"a reset's confirmation", tp + "/conversations/" + ids["conversation"], "#reset"},
			{"Endpoints", tp + "/endpoints", ""},
			{"a pause's confirmation", tp + "/endpoints", "button.pause"},
		}},
		{"configuration", false, []a11yStep{
			{"Notifications", tp + "/notifications", ""},
			{"Audit", tp + "/audit", ""},
			{"Audit filtered to nothing", tp + "/audit?actor=nobody", ""},
			{"Settings", tp + "/settings", ""},
			{"a revocation's confirmation", tp + "/settings", "button.revoke"},
			{"an error page", tp + "/attention/att_missing", ""},
		}},
	}
	for _, size := range []struct {
		name          string
		width, height int64
	}{{"1280x800", 1280, 800}, {"390x844", 390, 844}} {
		for _, g := range groups {
			t.Run(size.name+"/"+g.name, func(t *testing.T) {
				t.Parallel()
				phone := size.width < 600
				ctx := a11yTab(t, size.width, size.height)
				if !g.signedOut {
					do(t, ctx, "sign in", chromedp.Navigate(s.url+"/console/sign-in"))
					waitTitle(t, ctx, "Sign in")
					do(t, ctx, "type the token", chromedp.SendKeys(chromedp.ID("token"), s.admin+kb.Enter))
					waitFor(t, ctx, "signed in", `location.pathname.endsWith("/attention")`)
				}
				for _, st := range g.steps {
					do(t, ctx, "open "+st.path, chromedp.Navigate(s.url+st.path))
					if st.press != "" {
						waitFor(t, ctx, st.press, fmt.Sprintf(`document.readyState === "complete" && !!document.querySelector(%q)`, st.press))
						do(t, ctx, "press "+st.press, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).click()`, st.press)))
						waitTitle(t, ctx, "Confirm")
					}
					a11yCheck(t, ctx, st.what, phone)
				}
			})
		}
	}
}
