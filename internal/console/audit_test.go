package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

const auditPage = "/console/t/default/audit"

var auditRowID = regexp.MustCompile(`<tr data-id="(\d+)">`)

// auditRows are the entry IDs of an audit page, in order.
func auditRows(body string) []int64 {
	var out []int64
	for _, m := range auditRowID.FindAllStringSubmatch(body, -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		out = append(out, n)
	}
	return out
}

var olderLink = regexp.MustCompile(`href="([^"]+)" id="audit-older"`)

// TestConsoleAudit: the audit page is the API's audit log (who, when,
// what, object, request ID, newest first) in keyset pages, filtered by
// actor, action and object, objects shown by name; bad input is a 400 with
// the field named; members are refused 403, as on the API; another
// tenant's entries never show.
func TestConsoleAudit(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		s := start(t, b, func(cfg *server.Config) { cfg.NoDelivery = true; cfg.Console.PageSize = 4 })
		base := "/api/v1/tenants/default"
		var eps []string
		for i := range 3 {
			eps = append(eps, s.must(http.StatusCreated, http.MethodPost, base+"/endpoints", s.admin, map[string]any{
				"name": fmt.Sprintf("desk-%d %s", i, hostile), "url": "https://runtime.example.com/events"})["id"].(string))
		}
		member := s.operator("mia", "member")
		s.must(http.StatusCreated, http.MethodPost, "/api/v1/tenants", s.admin, map[string]any{"name": "acme"})
		c := s.client()
		c.signIn(s.admin)
		api := s.must(http.StatusOK, http.MethodGet, base+"/audit?limit=1000", s.admin, nil)["items"].([]any)

		// Every entry, page by page, newest first, as the API lists them.
		var seen []int64
		next := auditPage
		for pages := 0; next != ""; pages++ {
			p := c.get(next)
			if p.Status != http.StatusOK || pages > 20 {
				t.Fatalf("%s: %d", next, p.Status)
			}
			rows := auditRows(p.Body)
			if len(rows) > 4 {
				t.Fatalf("a page of %d rows, page size 4", len(rows))
			}
			seen = append(seen, rows...)
			next = ""
			if m := olderLink.FindStringSubmatch(p.Body); m != nil {
				next = strings.ReplaceAll(m[1], "&amp;", "&")
			}
		}
		if len(seen) != len(api) {
			t.Fatalf("the pages show %d entries, the API %d", len(seen), len(api))
		}
		for i, it := range api {
			if e := it.(map[string]any); int64(e["id"].(float64)) != seen[i] {
				t.Fatalf("entry %d: page %d, API %v", i, seen[i], e["id"])
			}
		}

		// A row: who, when, what, the object by name, the request ID.
		var create map[string]any
		for _, it := range api {
			if e := it.(map[string]any); e["action"] == "endpoint.create" && e["target"] == "endpoint:"+eps[1] {
				create = e
			}
		}
		id := strconv.FormatInt(int64(create["id"].(float64)), 10)
		p := c.get(auditPage + "?object=" + url.QueryEscape(eps[1]))
		if rows := auditRows(p.Body); len(rows) != 1 || strconv.FormatInt(rows[0], 10) != id {
			t.Fatalf("filtered by object %s: %v", eps[1], rows)
		}
		row := rowOf(t, p.Body, id)
		for _, want := range []string{">operator:admin<", ">endpoint.create<", "desk-1 &lt;script&gt;", `<code class="cfg-id">` + eps[1] + `</code>`,
			`datetime="` + create["at"].(string)[:19], create["request_id"].(string)} {
			if !strings.Contains(row, want) {
				t.Errorf("the row lacks %q:\n%s", want, row)
			}
		}
		if strings.Contains(p.Body, "<script>window.__xss") {
			t.Fatal("an endpoint's name is not escaped")
		}

		// Filters: by action, by actor, combined, none matching.
		p = c.get(auditPage + "?action=endpoint.create")
		if rows := auditRows(p.Body); len(rows) != 3 || strings.Contains(p.Body, ">operator.create<") {
			t.Fatalf("filtered by action: %v", rows)
		}
		if p := c.get(auditPage + "?actor=operator:admin&action=operator.create"); len(auditRows(p.Body)) != 1 ||
			!strings.Contains(p.Body, `value="operator.create"`) {
			t.Fatalf("filtered by actor and action: %v", auditRows(p.Body))
		}
		if p := c.get(auditPage + "?actor=" + url.QueryEscape(`"><script>x</script>`)); p.Status != http.StatusOK ||
			len(auditRows(p.Body)) != 0 || strings.Contains(p.Body, "<script>x") || !strings.Contains(p.Body, `id="audit-empty"`) {
			t.Fatalf("a filter matching nothing: %d", p.Status)
		}

		// Bad input: 400 naming the field, never a 500.
		for _, q := range []string{"before=abc", "before=-4", "before=99999999999999999999", "actor=%00", "object=%ff",
			"action=" + strings.Repeat("a", 300)} {
			if p := c.get(auditPage + "?" + q); p.Status != http.StatusBadRequest {
				t.Errorf("%s: %d", q, p.Status)
			}
		}

		// Another tenant's entries are not here: tenant.create is in both
		// logs, but acme's own entries are not in default's.
		acmeTok := s.must(http.StatusCreated, http.MethodPost, "/api/v1/tenants", s.admin, map[string]any{"name": "globex"})["admin"].(map[string]any)["token"].(string)
		s.must(http.StatusCreated, http.MethodPost, "/api/v1/tenants/globex/endpoints", acmeTok, map[string]any{
			"name": "globex-desk", "url": "https://runtime.example.com/events"})
		if p := c.get(auditPage + "?object=endpoint:"); strings.Contains(p.Body, "globex-desk") || len(auditRows(p.Body)) == 0 {
			t.Fatal("another tenant's entry shows in the audit page")
		}

		// Members: 403, as GET …/audit.
		mc := s.client()
		mc.signIn(member)
		if p := mc.get(auditPage); p.Status != http.StatusForbidden || !strings.Contains(p.Body, `id="audit-forbidden"`) ||
			len(auditRows(p.Body)) != 0 {
			t.Fatalf("a member's audit page: %d", p.Status)
		}
	})
}
