package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/agentowl/agentowl/internal/server"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// repoFile reads the file at path from the repository's root, which the
// release tests check against what the binary accepts.
func repoFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", path))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// `agentowl version` and `--version` print the build; --json prints it as
// one object.
func TestVersion(t *testing.T) {
	t.Parallel()
	out := runCLI(t, "version").ok(t)
	if !strings.HasPrefix(out, "agentowl ") || !strings.Contains(out, "commit ") || !strings.Contains(out, runtime.Version()) {
		t.Errorf("agentowl version = %q, want the version, commit and %s", out, runtime.Version())
	}
	if got := runCLI(t, "--version").ok(t); got != out {
		t.Errorf("agentowl --version = %q, want what version prints, %q", got, out)
	}
	var doc map[string]string
	if err := json.Unmarshal([]byte(runCLI(t, "--json", "version").ok(t)), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["go_version"] != runtime.Version() || doc["version"] == "" || doc["commit"] == "" {
		t.Errorf("agentowl --json version = %v", doc)
	}
	if !strings.Contains(out, doc["version"]) || !strings.Contains(out, doc["commit"]) {
		t.Errorf("text %q and JSON %v disagree", out, doc)
	}
}

// composeExample holds the values an operator exports before `docker
// compose up` (compose.yaml's header says which): required variables
// without them fail.
var composeExample = map[string]string{
	"POSTGRES_PASSWORD":   "example-password",
	"AGENTOWL_SECRET_KEY": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
}

var interpolation = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}`)

// interpolate expands compose's ${VAR}, ${VAR:-default}, ${VAR-default},
// ${VAR:?message} and ${VAR?message} from env.
func interpolate(t *testing.T, v string, env map[string]string) string {
	t.Helper()
	return interpolation.ReplaceAllStringFunc(v, func(m string) string {
		p := interpolation.FindStringSubmatch(m)
		val, set := env[p[1]]
		switch p[2] {
		case ":-", "-":
			if !set || (val == "" && p[2] == ":-") {
				return p[3]
			}
		case ":?", "?":
			if !set || (val == "" && p[2] == ":?") {
				t.Fatalf("compose.yaml requires %s (%s); the example environment lacks it", p[1], p[3])
			}
		}
		return val
	})
}

// serveSettings is every environment variable `serve` reads.
func serveSettings() []string {
	var names []string
	for _, s := range settings {
		names = append(names, s.env)
	}
	return names
}

// checkServeAccepts fails unless every AGENTOWL_ variable of env is a serve
// setting and serve's settings table accepts the values together.
func checkServeAccepts(t *testing.T, where string, env map[string]string) server.Config {
	t.Helper()
	known := serveSettings()
	for k := range env {
		if strings.HasPrefix(k, "AGENTOWL_") && !slices.Contains(known, k) {
			t.Errorf("%s sets %s, which `agentowl serve` does not read (docs/settings.md lists what it does)", where, k)
		}
	}
	cfg, err := configureWith(t, env)
	if err != nil {
		t.Errorf("%s: serve refuses its settings: %v", where, err)
	}
	return cfg
}

// The compose file's agentowl settings are ones `serve` accepts, with the
// values the file gives them: a renamed or mistyped setting fails here, not
// on an operator's first `docker compose up`.
func TestComposeSettings(t *testing.T) {
	t.Parallel()
	data := repoFile(t, "compose.yaml")
	var doc struct {
		Services map[string]struct {
			Image       string    `yaml:"image"`
			Build       any       `yaml:"build"`
			Environment yaml.Node `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	svc, ok := doc.Services["agentowl"]
	if !ok {
		t.Fatalf("compose.yaml has no agentowl service: %v", doc.Services)
	}
	if _, ok := doc.Services["postgres"]; !ok {
		t.Errorf("compose.yaml has no postgres service")
	}
	env := composeEnvironment(t, &svc.Environment)
	for k, v := range env {
		env[k] = interpolate(t, v, composeExample)
	}
	cfg := checkServeAccepts(t, "compose.yaml", env)
	if !server.IsPostgresURL(cfg.DatabaseURL) {
		t.Errorf("compose.yaml's agentowl does not use the postgres service: database URL %q", cfg.DatabaseURL)
	}
	if len(cfg.SecretKey) != 32 {
		t.Errorf("compose.yaml gives no AGENTOWL_SECRET_KEY; replicas must share one")
	}
	if !strings.HasPrefix(cfg.Listen, "0.0.0.0:") {
		t.Errorf("compose.yaml listens on %q; in a container it must listen on every interface", cfg.Listen)
	}
}

// composeEnvironment reads a service's environment in either of compose's
// forms: a map, or a list of NAME=value.
func composeEnvironment(t *testing.T, n *yaml.Node) map[string]string {
	t.Helper()
	env := map[string]string{}
	switch n.Kind {
	case yaml.MappingNode:
		var m map[string]string
		if err := n.Decode(&m); err != nil {
			t.Fatal(err)
		}
		for k, v := range m {
			env[k] = v
		}
	case yaml.SequenceNode:
		var list []string
		if err := n.Decode(&list); err != nil {
			t.Fatal(err)
		}
		for _, kv := range list {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	default:
		t.Fatalf("environment at line %d is neither a map nor a list", n.Line)
	}
	return env
}

// The Dockerfile's ENV settings are ones `serve` accepts; the image runs as
// a non-root user, builds a static binary and declares its data volume.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	data := repoFile(t, "Dockerfile")
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	env := map[string]string{}
	var user, volume string
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "ENV":
			for _, kv := range f[1:] {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
		case "USER":
			user = f[1]
		case "VOLUME":
			volume = f[1]
		}
	}
	cfg := checkServeAccepts(t, "Dockerfile", env)
	if user == "" || strings.HasPrefix(user, "0") || strings.HasPrefix(user, "root") {
		t.Errorf("Dockerfile USER = %q, want a non-root user", user)
	}
	if volume == "" || volume != cfg.DataDir {
		t.Errorf("Dockerfile VOLUME %q, want the data directory %q", volume, cfg.DataDir)
	}
	if !strings.Contains(text, "CGO_ENABLED=0") {
		t.Errorf("Dockerfile does not build a static binary (CGO_ENABLED=0)")
	}
	for _, v := range []string{"buildinfo.version", "buildinfo.commit"} {
		if !strings.Contains(text, v) {
			t.Errorf("Dockerfile does not set %s: `agentowl version` would say devel/unknown", v)
		}
	}
}

// served returns the name of every metric the server serves: the families
// /metrics prints, and those of the engine's and the scheduler's
// collectors, which print only once observed.
func served(t *testing.T, r *running) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	send(t, http.MethodGet, r.url+"/healthz", "", nil) // counted in the requests metrics
	scrape := send(t, http.MethodGet, r.url+"/metrics", "", nil)
	expectStatus(t, "/metrics", scrape, http.StatusOK)
	for _, line := range strings.Split(string(scrape.body), "\n") {
		if f := strings.Fields(line); len(f) >= 4 && f[0] == "#" && f[1] == "TYPE" {
			names[f[2]] = true
			if f[3] == "histogram" {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					names[f[2]+suffix] = true
				}
			}
		}
	}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	descs := make(chan *prometheus.Desc, 100)
	for _, c := range append(r.m.Engine().Metrics().Collectors(r.m.Store()), r.m.Scheduler().Collectors()...) {
		c.Describe(descs)
	}
	close(descs)
	for d := range descs {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
				names[m[1]+suffix] = true
			}
		}
	}
	return names
}

// The operating guide's example alerting rules parse, and every metric
// they name is one the server serves.
func TestOperatingGuideRules(t *testing.T) {
	t.Parallel()
	data := repoFile(t, "docs/operating.md")
	type rule struct {
		Alert string `yaml:"alert"`
		Expr  string `yaml:"expr"`
	}
	var all []rule
	for _, part := range strings.Split(string(data), "```yaml\ngroups:")[1:] {
		block, _, closed := strings.Cut(part, "```")
		if !closed {
			t.Fatal("docs/operating.md has an unclosed ```yaml block")
		}
		var doc struct {
			Groups []struct {
				Name  string `yaml:"name"`
				Rules []rule `yaml:"rules"`
			} `yaml:"groups"`
		}
		if err := yaml.Unmarshal([]byte("groups:"+block), &doc); err != nil {
			t.Fatalf("the rules do not parse: %v", err)
		}
		for _, g := range doc.Groups {
			all = append(all, g.Rules...)
		}
	}
	site := newSite(t, storetest.Backends(t)[0])
	names := served(t, site.start(t, nil))
	metric := regexp.MustCompile(`agentowl_[a-z_]+`)
	for _, r := range all {
		if r.Alert == "" || r.Expr == "" {
			t.Errorf("rule %+v lacks an alert name or an expression", r)
		}
		for _, m := range metric.FindAllString(r.Expr, -1) {
			if !names[m] {
				t.Errorf("rule %s names %s, which /metrics does not serve", r.Alert, m)
			}
		}
	}
	if len(all) < 10 {
		t.Errorf("%d rules, want the guide's examples", len(all))
	}
}
