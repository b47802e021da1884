package main

import (
	"strings"
	"testing"
	"time"

	"github.com/backstop-go/backstop/policyk8s"
)

func TestSameHost(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"orders", "orders", true},
		{"orders", "orders.shop", true},                        // a short name is any namespace's
		{"orders.shop", "orders.shop.svc.cluster.local", true}, // the cluster suffix is dropped
		{"orders.shop", "orders.billing", false},               // two namespaces
		{"orders", "payments", false},
		{"*.example.com", "api.example.com", true},
		{"*.example.com", "example.com", false},
		{"*", "anything", true},
		{"api.example.com:8443", "api.example.com", true}, // the port is not the host
	} {
		if got := sameHost(c.a, c.b); got != c.want {
			t.Errorf("sameHost(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestMuxPattern(t *testing.T) {
	for _, c := range []struct {
		pattern, host string
		want          pathMatch
	}{
		{"/v1/", "", pathMatch{"/v1/", true}},
		{"GET /v1/charges", "", pathMatch{"/v1/charges", false}},
		{"POST api.example.com/v1/charges/{id}", "api.example.com", pathMatch{"/v1/charges/", true}},
		{"/files/{path...}", "", pathMatch{"/files/", true}},
		{"/{$}", "", pathMatch{"/", false}},
		{"orders", "orders", pathMatch{"/", true}},
	} {
		host, m := muxPattern(c.pattern)
		if host != c.host || m != c.want {
			t.Errorf("muxPattern(%q) = %q, %+v; want %q, %+v", c.pattern, host, m, c.host, c.want)
		}
	}
}

// TestCallPaths_GatewayAppSidecarMultiply: a gateway route to the app, the app's stack
// and the sidecar's route to the dependency, each retrying 3 times, are one call path
// of 27 attempts; the fix keeps the app's retry and drops the other two.
func TestCallPaths_GatewayAppSidecarMultiply(t *testing.T) {
	gate := hop{layer: layerGateway, source: "gateway-api", what: "HTTPRoute shop/web rules[0]", hosts: []string{"checkout"},
		tries: 3, wait: 10 * time.Second, drop: "remove retry from HTTPRoute shop/web rules[0]"}
	app := hop{layer: layerApp, source: "backstop", what: "stack orders", hosts: []string{"orders.shop"},
		paths: []pathMatch{{"/v1/", true}}, tries: 3, perTry: time.Second, wait: 2 * time.Second, worst: 2 * time.Second, drop: "drop stack orders's retry"}
	side := hop{layer: layerSidecar, source: "istio", what: "VirtualService shop/orders http[0]", hosts: []string{"orders.shop.svc.cluster.local"},
		paths: []pathMatch{{"/v1/orders", false}}, tries: 3, perTry: 2 * time.Second, worst: 6 * time.Second, drop: "set retries.attempts: 0"}
	elsewhere := hop{layer: layerSidecar, source: "istio", what: "VirtualService shop/payments http[0]", hosts: []string{"payments"}, tries: 3}

	paths := callPaths([]hop{side, app, gate, elsewhere}, "checkout")
	if len(paths) != 1 {
		t.Fatalf("callPaths = %d paths (%v), want 1", len(paths), paths)
	}
	p := paths[0]
	if got := p.attempts(); got != 27 {
		t.Errorf("attempts = %d, want 27 (3 × 3 × 3)", got)
	}
	if got, want := p.String(), "gateway HTTPRoute shop/web rules[0] (3 tries) -> app stack orders (3 tries) -> sidecar VirtualService shop/orders http[0] (3 tries)"; got != want {
		t.Errorf("path = %q, want %q", got, want)
	}
	if k := keeper(p.owners()); k.what != "stack orders" {
		t.Errorf("keeper = %s, want the app's stack", k.what)
	}

	l := &linter{service: "checkout"}
	l.paths([]hop{side, app, gate, elsewhere})
	ids := map[string]finding{}
	for _, f := range l.fs {
		ids[f.ID] = f
	}
	two, ok := ids["two-owners"]
	if !ok {
		t.Fatalf("findings %v lack two-owners", l.fs)
	}
	if !strings.Contains(two.Message, "up to 27 attempts") || !strings.Contains(two.Fix, "remove retry from HTTPRoute") || !strings.Contains(two.Fix, "set retries.attempts: 0") {
		t.Errorf("two-owners = %+v; want 27 attempts and a fix dropping the gateway's and the sidecar's retries", two)
	}
	// The app's 1s try ends while the sidecar may retry for 6s.
	if f, ok := ids["path-timeouts"]; !ok || !strings.Contains(f.Message, "6s") {
		t.Errorf("path-timeouts = %+v, %v; want the sidecar's 6s against the app's 1s per-try timeout", f, ok)
	}
}

// TestCallPaths_GatewayBeforeMesh: a gateway route in front of the mesh's route to the
// same Service is a path if the gateway is in the mesh: vague.
func TestCallPaths_GatewayBeforeMesh(t *testing.T) {
	gate := hop{layer: layerGateway, what: "HTTPRoute a", hosts: []string{"orders"}, tries: 2}
	side := hop{layer: layerSidecar, what: "HTTPRoute b", hosts: []string{"orders"}, tries: 2}
	other := hop{layer: layerSidecar, what: "HTTPRoute c", hosts: []string{"payments"}, tries: 2}
	paths := callPaths([]hop{gate, side, other}, "")
	if len(paths) != 1 || !paths[0].vague || paths[0].attempts() != 4 {
		t.Fatalf("callPaths = %+v; want one vague path of 4 attempts", paths)
	}
	app := hop{layer: layerApp, what: "stack x", hosts: []string{"payments"}, tries: 1}
	if paths := callPaths([]hop{gate, side, app}, "checkout"); len(paths) != 1 || len(paths[0].hops) != 2 || !paths[0].vague {
		t.Errorf("with -service checkout, callPaths = %+v; want the gateway and the mesh's route to orders only, vague: the gateway sends to orders, not to the app", paths)
	}
}

func TestK8sHosts_ServiceParentInAnotherNamespace(t *testing.T) {
	r := &policyk8s.Route{Kind: "HTTPRoute", Namespace: "shop", ParentRefs: []string{"Service/billing/orders", "Service/api"}}
	got := k8sHosts(r, layerSidecar)
	if len(got) != 2 || got[0] != "orders.billing" || got[1] != "api.shop" {
		t.Errorf("k8sHosts = %q, want [orders.billing api.shop]", got)
	}
}
