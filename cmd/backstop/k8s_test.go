package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLint_MeshCallPath: a gateway's HTTPRoute retrying to the app, the app's own
// stack, and Istio's sidecar retrying the app's calls to orders are one call path of
// 3 × 3 × 4 = 36 attempts per user request; lint says so at the gateway's retry,
// keeps the app's retry (it has a budget) and says how to drop the other two in
// their own words. With them dropped, one owner is left and no error.
func TestLint_MeshCallPath(t *testing.T) {
	args := []string{"-k8s", "testdata/mesh/k8s", "-config", "testdata/mesh/checkout.backstop.yaml", "-service", "checkout"}
	code, fs := lintJSON(t, args...)
	if code != exitFindings {
		t.Errorf("lint %v = %d, want %d", args, code, exitFindings)
	}
	byID := map[string][]finding{}
	for _, f := range fs {
		byID[f.ID] = append(byID[f.ID], f)
	}
	two := byID["two-owners"]
	if len(two) != 1 {
		t.Fatalf("two-owners findings: %+v; want 1", two)
	}
	f := two[0]
	if f.File != "testdata/mesh/k8s/gateway.yaml" || f.Line != 22 || f.Column != 5 || f.Field != "retry" {
		t.Errorf("two-owners at %s:%d:%d %s; want testdata/mesh/k8s/gateway.yaml:22:5, the gateway's retry", f.File, f.Line, f.Column, f.Field)
	}
	for _, want := range []string{"3 layers retry", "up to 36 attempts per user request",
		"gateway HTTPRoute shop/web rules[0] (3 tries) -> app stack orders (3 tries) -> sidecar VirtualService shop/orders http[0] (4 tries)"} {
		if !strings.Contains(f.Message, want) {
			t.Errorf("two-owners message %q lacks %q", f.Message, want)
		}
	}
	for _, want := range []string{"keep one owner, app stack orders", "remove retry from HTTPRoute shop/web rules[0]",
		"set retries: {attempts: 0} on VirtualService shop/orders http[0]"} {
		if !strings.Contains(f.Fix, want) {
			t.Errorf("two-owners fix %q lacks %q", f.Fix, want)
		}
	}
	// The app's 500ms try ends while the sidecar may retry for its 6s timeout.
	if pt := byID["path-timeouts"]; len(pt) != 1 || pt[0].File != "testdata/mesh/k8s/orders.yaml" || !strings.Contains(pt[0].Message, "6s, beyond the 500ms per-try timeout of app stack orders") {
		t.Errorf("path-timeouts: %+v", pt)
	}
	// The sidecar's retries have no budget; the app's stack has one.
	if nb := byID["no-budget"]; len(nb) != 2 {
		t.Errorf("no-budget: %+v; want the gateway's and the sidecar's routes", nb)
	}
	if sk := byID["skipped"]; len(sk) != 1 || !strings.Contains(sk[0].Message, "Service shop/orders") {
		t.Errorf("skipped: %+v; want the Service", sk)
	}

	after := []string{"-k8s", "testdata/mesh/after/k8s", "-config", "testdata/mesh/checkout.backstop.yaml", "-service", "checkout"}
	code, fs = lintJSON(t, after...)
	if code != exitOK {
		t.Errorf("lint %v = %d, want %d: %+v", after, code, exitOK, fs)
	}
	var paths []finding
	for _, f := range fs {
		if f.ID == "call-path" {
			paths = append(paths, f)
		}
	}
	if len(paths) != 1 || !strings.Contains(paths[0].Message, "3 attempts per user request at most; one owner, app stack orders") {
		t.Errorf("after: call paths %+v; want one, of 3 attempts, owned by the app", paths)
	}
}

// TestLint_MeshWithoutService: without -service, the gateway's route is not known
// to front the app: the app's stack and the sidecar are still one path, of 12.
func TestLint_MeshWithoutService(t *testing.T) {
	_, fs := lintJSON(t, "-k8s", "testdata/mesh/k8s", "-config", "testdata/mesh/checkout.backstop.yaml")
	for _, f := range fs {
		if f.ID == "two-owners" && !strings.Contains(f.Message, "up to 12 attempts") {
			t.Errorf("two-owners without -service: %q; want 12 attempts (app 3 × sidecar 4)", f.Message)
		}
	}
}

// TestExplain_K8s: each route rule in its source's words, and as JSON with
// attempts_at_most and worst_case_seconds.
func TestExplain_K8s(t *testing.T) {
	code, out, errs := runCLI("explain", "-k8s", "testdata/mesh/k8s")
	if code != exitOK {
		t.Fatalf("explain = %d: %s", code, errs)
	}
	for _, want := range []string{"gateway-api HTTPRoute shop/web rules[0] (testdata/mesh/k8s/gateway.yaml:",
		"istio VirtualService shop/orders http[0] (testdata/mesh/k8s/orders.yaml:",
		"retries.attempts: 3 retries, up to 4 tries, the first included"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
	code, out, errs = runCLI("explain", "-json", "-k8s", "testdata/mesh/k8s")
	if code != exitOK {
		t.Fatalf("explain -json = %d: %s", code, errs)
	}
	var views []struct {
		Config           string   `json:"config"`
		Source           string   `json:"source"`
		AttemptsAtMost   int      `json:"attempts_at_most"`
		WorstCaseSeconds *float64 `json:"worst_case_seconds"`
	}
	if err := json.Unmarshal([]byte(out), &views); err != nil {
		t.Fatal(err)
	}
	if len(views) != 2 {
		t.Fatalf("explain -json: %d routes, want 2:\n%s", len(views), out)
	}
	// The gateway: 3 tries of 3s and their waits, cut at its 10s request timeout;
	// Istio: 4 tries of 2s, cut at its 6s timeout.
	for i, want := range []struct {
		source   string
		attempts int
		worst    float64
	}{{"gateway-api", 3, 10}, {"istio", 4, 6}} {
		v := views[i]
		if v.Config != "k8s-route" || v.Source != want.source || v.AttemptsAtMost != want.attempts || v.WorstCaseSeconds == nil || *v.WorstCaseSeconds != want.worst {
			t.Errorf("route %d: %+v; want %s with %d attempts and a worst case of %vs", i, v, want.source, want.attempts, want.worst)
		}
	}
}

// TestLint_K8sRefusedPlaced: a manifest the Gateway API refuses is an error at its
// file:line:column naming the field.
func TestLint_K8sRefusedPlaced(t *testing.T) {
	code, out, _ := runStdin("apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: a}\nspec:\n  rules:\n  - retry: {atempts: 2}\n",
		"lint", "-k8s", "-")
	if code != exitFindings || !strings.Contains(out, "<stdin>:6:") || !strings.Contains(out, "atempts") {
		t.Errorf("lint of a misspelt field = %d:\n%s", code, out)
	}
}

// TestMeshGuide_SampleOutputs: the worked example of docs/mesh.md prints what the
// guide shows: lint before and after choosing one owner, and the simulated load on
// orders.
func TestMeshGuide_SampleOutputs(t *testing.T) {
	wd, _ := os.Getwd()
	if err := os.Chdir("testdata/mesh"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := os.Chdir(wd); err != nil {
			t.Fatal(err)
		}
	}()
	const guide = "../../../../docs/mesh.md"
	for _, tt := range []struct {
		marker string
		args   []string
	}{
		{"mesh-lint-before", []string{"lint", "-k8s", "k8s", "-config", "checkout.backstop.yaml", "-service", "checkout"}},
		{"mesh-lint-after", []string{"lint", "-k8s", "after/k8s", "-config", "checkout.backstop.yaml", "-service", "checkout"}},
	} {
		_, out, errs := runCLI(tt.args...)
		if errs != "" {
			t.Fatalf("%q: stderr %q", tt.args, errs)
		}
		checkDoc(t, guide, tt.marker, "```\n$ backstop "+strings.Join(tt.args, " ")+"\n"+out+"```\n")
	}
	args := []string{"-scenario", "scenario.yaml", "-k8s", "k8s", "-k8s-route", "VirtualService shop/orders http[0]", "-stack", "k8s,backstop", "-out", ""}
	c, errs := parseSimArgs(t, args...)
	if c == nil {
		t.Fatal(errs)
	}
	var out, progress bytes.Buffer
	if err := simulate(t, c, &out, &progress); err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = a
		if strings.ContainsAny(a, " []") || a == "" {
			quoted[i] = "'" + a + "'"
		}
	}
	checkDoc(t, guide, "mesh-sim", "```\n$ backstop sim "+strings.Join(quoted, " ")+"\n"+out.String()+"```\n")
}

// TestLint_ManyManifests: a directory of 2 000 files, each a gateway's route and the
// mesh's route to one Service, is read and matched into 2 000 call paths (each
// gateway route meets the mesh's route to its own Service only), without comparing
// every route with every other.
func TestLint_ManyManifests(t *testing.T) {
	dir := t.TempDir()
	const n = 2000
	for i := range n {
		doc := fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: g%d, namespace: shop}
spec:
  parentRefs: [{name: public}]
  rules:
  - backendRefs: [{name: svc%d, port: 80}]
    retry: {attempts: 2}
    timeouts: {request: 5s}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: v%d, namespace: shop}
spec:
  hosts: [svc%d.shop.svc.cluster.local]
  http:
  - route: [{destination: {host: svc%d}}]
    timeout: 5s
`, i, i, i, i, i)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("m%d.yaml", i)), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, fs := lintJSON(t, "-k8s", dir)
	count := map[string]int{}
	for _, f := range fs {
		count[f.ID]++
	}
	// Each path: the gateway's 3 tries and Istio's default 3, if the gateway is in the mesh.
	if count["call-path"] != n || count["maybe-two-owners"] != n || count["default-retries"] != n {
		t.Errorf("findings by id: %v; want %d call paths, %d maybe-two-owners and %d default-retries", count, n, n, n)
	}
}
