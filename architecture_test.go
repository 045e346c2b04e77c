package agentowl_test

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/agentowl/agentowl"

// moduleImports maps each package of the module (by its path inside the
// module: "" for the root, "internal/work", …) to the packages of the
// module its non-test files import, as `go list` reports them.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	rel := func(p string) (string, bool) {
		if p == module {
			return "", true
		}
		r, ok := strings.CutPrefix(p, module+"/")
		return r, ok
	}
	graph := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		from, _ := rel(p.ImportPath)
		graph[from] = []string{}
		for _, imp := range p.Imports {
			if to, ok := rel(imp); ok {
				graph[from] = append(graph[from], to)
			}
		}
	}
	return graph
}

// under reports whether package p is dir or inside it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// TestArchitectureLayers enforces the import rules of docs/architecture.md
// on non-test code: the public protocol packages stand on the standard
// library, use-cases never reach up to HTTP or the assembly, only the
// assembly (and the store conformance suite) picks a concrete store, and
// the examples use only the public API.
func TestArchitectureLayers(t *testing.T) {
	graph := moduleImports(t)
	if len(graph) < 20 {
		t.Fatalf("go list found %d packages; run from the module root", len(graph))
	}
	// allowed lists, per package, every package of the module it may import.
	allowed := map[string][]string{
		"agentwork": {},
		"webhook":   {},
		"ijson":     {},
		// Attestations: verified with agentwork's canonical JSON (arguments
		// digests), like agentwork a public protocol package.
		"attest":     {"agentwork"},
		"":           {"agentwork"},
		"workclient": {"agentwork", "webhook", "attest"},
		"aap":        {"webhook", "ijson", "attest"},
		// The MCP gateway is a harness: it stands on the kit alone (its
		// command picks the store) and the JSON rule every surface shares.
		"internal/mcpgateway": {"aap", "ijson", "attest"},
	}
	for p, may := range allowed {
		imps, ok := graph[p]
		if !ok {
			t.Errorf("package %q not found", p)
		}
		for _, imp := range imps {
			if !slices.Contains(may, imp) {
				t.Errorf("%s imports %s; it may import only the standard library and %v", module+"/"+p, imp, may)
			}
		}
	}
	for p, imps := range graph {
		for _, imp := range imps {
			var why string
			switch {
			case under(imp, "internal/server") && !under(p, "internal/server") && p != "cmd/agentowl":
				why = "only cmd/agentowl (and servertest) start the one server assembly"
			case imp == "internal/httpapi" && !under(p, "internal/server"):
				why = "only the assembly mounts the HTTP surfaces"
			case (under(imp, "internal/store/sqlite") || under(imp, "internal/store/postgres")) &&
				!under(p, "internal/server") && !under(p, "internal/store"):
				why = "only the assembly picks a concrete store; the rest use the agentowl.Store interface"
			case under(p, "examples") && under(imp, "internal"):
				why = "examples use only the public packages"
			case (under(p, "internal") || under(p, "agentwork") || under(p, "attest") || under(p, "webhook") || under(p, "workclient") || under(p, "aap") || p == "") &&
				(under(imp, "cmd") || under(imp, "examples")):
				why = "libraries never import commands or examples"
			}
			if why != "" {
				t.Errorf("%s imports %s: %s", p, imp, why)
			}
		}
	}
	// The use-cases sit below HTTP: none imports internal/httpapi (checked
	// above) and, for the domain services, none imports the inbox or ingress
	// that are built on them.
	for _, p := range []string{"internal/access", "internal/approval", "internal/work", "internal/delivery", "internal/store/sqlstore"} {
		for _, imp := range graph[p] {
			if imp == "internal/inbox" || imp == "internal/ingress" || imp == "internal/maintenance" {
				t.Errorf("%s imports %s, which is built on it", p, imp)
			}
		}
	}
}

// TestArchitectureFacesWithoutStore: the faces translate; they call the
// domain and the use-cases, never persistence, not even through another
// package: the store's interfaces are the domain's (store*.go at the root),
// and only the assembly (internal/server) links a store.
func TestArchitectureFacesWithoutStore(t *testing.T) {
	for _, p := range []string{"./internal/httpapi", "./internal/console", "./cmd/agentowl"} {
		out, err := exec.Command("go", "list", "-deps", p).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", p, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			rel, ok := strings.CutPrefix(dep, module+"/")
			if !ok || !under(rel, "internal/store") {
				continue
			}
			if p != "./cmd/agentowl" {
				t.Errorf("%s depends on %s: faces never reach the store; add a use-case", p, dep)
			}
		}
	}
	// cmd/agentowl links the stores, and only through the assembly: no
	// package but internal/server (and the store's own) imports one.
	for p, imps := range moduleImports(t) {
		for _, imp := range imps {
			if under(imp, "internal/store") && !under(p, "internal/server") && !under(p, "internal/store") {
				t.Errorf("%s imports %s: only the assembly links a store", p, imp)
			}
		}
	}
}

// TestArchitectureUseCasesWithoutEngine: the use-cases enqueue through
// internal/outbox and never link the delivery engine or its metrics.
func TestArchitectureUseCasesWithoutEngine(t *testing.T) {
	for _, p := range []string{"./internal/work", "./internal/approval", "./internal/inbox", "./internal/ingress"} {
		out, err := exec.Command("go", "list", "-deps", p).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", p, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == module+"/internal/delivery" || strings.HasPrefix(dep, "github.com/prometheus/") {
				t.Errorf("%s depends on %s: use-cases enqueue through internal/outbox", p, dep)
			}
		}
	}
}

// TestArchitectureOneIDRule: every ID the server mints comes from
// agentowl.NewID; no other non-test package of the server mints UUIDs or
// declares an ID function of its own.
func TestArchitectureOneIDRule(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,GoFiles,Dir", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath, Dir  string
			Imports, GoFiles []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if !under(rel, "internal") && rel != "" || rel == "internal/mcpgateway" {
			continue // the harness side (public kits, the gateway) and tools mint their own keys
		}
		if slices.Contains(p.Imports, "github.com/google/uuid") {
			t.Errorf("%s imports github.com/google/uuid: mint IDs with agentowl.NewID", p.ImportPath)
		}
		for _, f := range p.GoFiles {
			b, err := os.ReadFile(p.Dir + "/" + f)
			if err != nil {
				t.Fatal(err)
			}
			if rel != "" && strings.Contains(string(b), "\nfunc NewID(") {
				t.Errorf("%s/%s declares NewID: mint IDs with agentowl.NewID", p.ImportPath, f)
			}
		}
	}
}
