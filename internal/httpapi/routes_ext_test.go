package httpapi_test

import (
	"bytes"
	"testing"

	"github.com/agentowl/agentowl/internal/httpapi"
	"github.com/agentowl/agentowl/internal/work"
)

// TestRouteTableAgreesWithMatrix: the route table's auth kinds are those of
// the authorization matrix's independent rows (authzRoutes), so the table
// says truthfully who may call each route.
func TestRouteTableAgreesWithMatrix(t *testing.T) {
	t.Parallel()
	table := httpapi.RouteAuths()
	for op, n := range authzRoutes {
		want := string(n)
		if n == needSystemAdmin {
			want = string(needAdmin) // an admin of the caller's own tenant; the use-case requires the system tenant
		}
		if got, ok := table[op]; !ok {
			t.Errorf("%s: in the matrix, not in the route table", op)
		} else if got != want {
			t.Errorf("%s: route table says %s, the matrix %s", op, got, n)
		}
	}
	for op := range table {
		if _, ok := authzRoutes[op]; !ok {
			t.Errorf("%s: in the route table, not in the matrix", op)
		}
	}
}

// TestMetricsSurfaces: requests count under their route's surface, the
// runtime and ingress surfaces included.
func TestMetricsSurfaces(t *testing.T) {
	forEachWorkBackend(t, work.Config{}, func(t *testing.T, e *workEnv) {
		e.do("GET", "/healthz", "", nil)
		e.do("POST", "/runtime/v1/work/work_x/callbacks", "", map[string]any{})
		e.do("GET", "/runtime/v1/work/work_x/decisions", "", nil)
		e.do("POST", "/in/webhook/nope", "", map[string]any{})
		e.do("GET", "/v1/requests/x", "", nil)
		e.do("GET", tenantPath+"/attention", "", nil)
		r := e.do("GET", "/metrics", "", nil)
		for _, line := range []string{
			`agentowl_http_requests_total{method="GET",status="200",surface="health"} 1`,
			`agentowl_http_requests_total{method="POST",status="401",surface="runtime"} 1`,
			`agentowl_http_requests_total{method="GET",status="401",surface="runtime"} 1`,
			`agentowl_http_requests_total{method="POST",status="404",surface="ingress"} 1`,
			`agentowl_http_requests_total{method="GET",status="401",surface="provider"} 1`,
			`agentowl_http_requests_total{method="GET",status="401",surface="operator"} 1`,
		} {
			if !bytes.Contains(r.Body, []byte(line)) {
				t.Errorf("metrics lack %q:\n%s", line, r.Body)
			}
		}
	})
}
