package httpapi

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/clocktest"
)

// repoFile is path relative to the module root.
func repoFile(path string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", path)
}

// TestRouteTable walks the route table against api/openapi.yaml: every
// documented operation has exactly one row and every row is documented;
// each row's surface and auth kind fit its path.
func TestRouteTable(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromFile(repoFile("api/openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	rows := map[string]route{}
	for _, rt := range (&Server{}).routes() {
		op := rt.method + " " + rt.pattern
		if _, dup := rows[op]; dup {
			t.Errorf("%s: two rows", op)
		}
		rows[op] = rt
		if rt.serve == nil {
			t.Errorf("%s: no handler", op)
		}
		if (rt.auth == authRuntime) != (rt.scope != "") {
			t.Errorf("%s: auth %s with scope %q; runtime routes, and only they, name a scope", op, rt.auth, rt.scope)
		}
		surface, auths := surfaceHealth, []authKind{authPublic}
		for _, sf := range []struct {
			prefix, surface string
			auths           []authKind
		}{
			{"/v1/", surfaceProvider, []authKind{authProvisioner, authInstance}},
			{"/api/v1/", surfaceOperator, []authKind{authMember, authAdmin}},
			{"/runtime/v1/", surfaceRuntime, []authKind{authRuntime}},
			{"/in/", surfaceIngress, []authKind{authIngress}},
		} {
			if strings.HasPrefix(rt.pattern, sf.prefix) {
				surface, auths = sf.surface, sf.auths
			}
		}
		if rt.surface != surface || !slices.Contains(auths, rt.auth) {
			t.Errorf("%s: surface %s, auth %s; want surface %s, auth one of %v", op, rt.surface, rt.auth, surface, auths)
		}
	}
	var missing, extra []string
	for op := range documented {
		if _, ok := rows[op]; !ok {
			missing = append(missing, op)
		}
	}
	for op := range rows {
		if !documented[op] {
			extra = append(extra, op)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing)+len(extra) > 0 {
		t.Fatalf("documented operations without a route: %v\nroutes not in api/openapi.yaml: %v", missing, extra)
	}
}

// errorCodes returns the value of every ECode constant of the root
// package's error.go.
func errorCodes(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), repoFile("error.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]string{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "ECode") {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Fatalf("%s is not a string literal", name.Name)
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				codes[name.Name] = v
			}
		}
	}
	if len(codes) == 0 {
		t.Fatal("no ECode constants found in error.go")
	}
	return codes
}

// TestErrorCodesHaveStatus: every error code of the root package has a
// status in statusOf, and a code without one is answered as 500 internal,
// never as a 400 that blames the caller.
func TestErrorCodesHaveStatus(t *testing.T) {
	t.Parallel()
	for name, code := range errorCodes(t) {
		if _, ok := statusOf[code]; !ok {
			t.Errorf("agentowl.%s (%q) has no status in statusOf", name, code)
		}
	}

	s := New(Services{Clock: clocktest.New(time.Now()), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, Config{})
	rec := httptest.NewRecorder()
	s.writeError(rec, httptest.NewRequest(http.MethodGet, "/v1/requests/x", nil),
		agentowl.Errorf("made_up_code", "A code nobody mapped."))
	var body errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusInternalServerError || body.Error.Type != "internal" || body.Error.Code != agentowl.ECodeInternal ||
		strings.Contains(body.Error.Message, "nobody") {
		t.Fatalf("unmapped code: %d %+v; want 500 internal", rec.Code, body.Error)
	}
}
