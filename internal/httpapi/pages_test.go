package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestListPages pages through Needs attention (runtime requests and AAP
// requests merged, many at one time) and through work: the pages, joined,
// are the whole list in its order, and a bad page token is refused.
func TestListPages(t *testing.T) {
	parallelWork(t, func(t *testing.T, e *workEnv) {
		inst := newInstance(t, e.env)
		h := e.handOff(t)
		exp := e.expiry(time.Hour)
		for i := range 3 {
			submit(t, e.env, inst.Credential, refundBody())
			receipt(t, "needs_input", e.needsInput(h, i+1, questionRequest(fmt.Sprint("q", i), 1, exp)))
			if i == 1 {
				e.clock.Advance(time.Second)
			}
		}
		for range 2 {
			e.handOff(t)
		}
		for _, list := range []string{"/attention?status=unresolved&", "/work?"} {
			full := wantJSON(t, "full", e.do(http.MethodGet, tenantPath+list+"limit=1000", e.operatorToken, nil), http.StatusOK)
			want := full["items"].([]any)
			if full["next"] != nil || len(want) < 3 {
				t.Fatalf("%s: full list %v", list, full)
			}
			var got []any
			next := ""
			for pages := 0; ; pages++ {
				q := list + "limit=2"
				if next != "" {
					q += "&after=" + next
				}
				page := wantJSON(t, "page", e.do(http.MethodGet, tenantPath+q, e.operatorToken, nil), http.StatusOK)
				got = append(got, page["items"].([]any)...)
				n, _ := page["next"].(string)
				if n == "" || pages > 20 {
					break
				}
				next = n
			}
			if fmt.Sprint(pageIDs(got)) != fmt.Sprint(pageIDs(want)) {
				t.Fatalf("%s: pages give %v, want %v", list, pageIDs(got), pageIDs(want))
			}
			expectRefused(t, "bad page token", e.do(http.MethodGet, tenantPath+list+"after=x", e.operatorToken, nil),
				http.StatusBadRequest, "invalid_field")
		}
	})
}

func pageIDs(items []any) []any {
	var out []any
	for _, it := range items {
		out = append(out, it.(map[string]any)["id"])
	}
	return out
}
