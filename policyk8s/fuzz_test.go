package policyk8s_test

import (
	"errors"
	"os"
	"testing"

	"github.com/backstop-go/backstop/config"
	"github.com/backstop-go/backstop/policyk8s"
)

// checkParse asserts what holds for any input: Parse does not panic; a refusal is
// ConfigErrors matching ErrInvalid; an accepted Set has sane counts, explains, and
// imports into a configuration config builds.
func checkParse(t *testing.T, data []byte) {
	set, err := policyk8s.Parse("f.yaml", data)
	if err != nil {
		if !errors.Is(err, policyk8s.ErrInvalid) {
			t.Fatalf("Parse error %v does not match ErrInvalid", err)
		}
		if set != nil {
			t.Fatalf("Parse returned a Set with an error")
		}
		return
	}
	for _, r := range set.Routes {
		if r.Tries < 0 || r.WorstCase() < 0 || r.Timeout < 0 || r.PerTryTimeout < 0 {
			t.Fatalf("route %s/%s[%d]: Tries %d, WorstCase %v", r.Namespace, r.Name, r.Rule, r.Tries, r.WorstCase())
		}
		if len(r.Explain().Lines) == 0 {
			t.Fatalf("route %s: no explanation", r.Name)
		}
	}
	if len(set.Routes) == 0 {
		return // config builds no file without a stack
	}
	if _, err := policyk8s.Import("f.yaml", set).Build(config.Options{}); err != nil {
		t.Fatalf("Import of an accepted set does not build: %v\n%s", err, data)
	}
}

// FuzzParse reads any bytes as manifests of every source.
func FuzzParse(f *testing.F) {
	for _, file := range []string{"testdata/gateway.yaml", "testdata/istio.yaml", "testdata/linkerd.yaml"} {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data) // a valid manifest of each source
	}
	f.Add([]byte("a: [1\n"))                                                                                                                                                                                                         // malformed YAML
	f.Add([]byte("a: &x [*x]\n"))                                                                                                                                                                                                    // an alias to itself
	f.Add([]byte("---\n---\n"))                                                                                                                                                                                                      // empty documents
	f.Add([]byte("{\"kind\": \"HTTPRoute\"}"))                                                                                                                                                                                       // JSON without apiVersion
	f.Add([]byte("apiVersion: v1\nkind: List\n"))                                                                                                                                                                                    // a List without items
	f.Add([]byte(httpRoute + "    retry: {attempts: 99999999999999999999}\n"))                                                                                                                                                       // out of range
	f.Add([]byte(httpRoute + "    timeouts: {request: 99999h99999m99999s99999ms}\n"))                                                                                                                                                // the longest duration
	f.Add([]byte("apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: v}\nspec:\n  http:\n  - retries: {attempts: 2147483647, backoff: 1000000h}\n    timeout: 0s\n    route: [{destination: {host: a}}]\n")) // huge counts
	f.Add([]byte("apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: d}\nspec:\n  host: a\n  trafficPolicy:\n    retryBudget: {percent: 0}\n    outlierDetection: {consecutive5xxErrors: 0}\n"))            // zeros
	f.Fuzz(func(t *testing.T, data []byte) { checkParse(t, data) })
}

// FuzzLinkerdAnnotations reads any annotation values as Linkerd's, on an HTTPRoute
// and on a GRPCRoute.
func FuzzLinkerdAnnotations(f *testing.F) {
	f.Add("5xx", "2", "100ms", "2s")            // the common case
	f.Add("500-504,gateway-error", "0", "", "") // limit 0: unset
	f.Add("600", "x", "1", "-1s")               // every value refused
	f.Add("", "65536", "0s", "0s")              // zeros and an overflow
	f.Fuzz(func(t *testing.T, http, limit, retryTimeout, request string) {
		for _, kind := range []string{"HTTPRoute", "GRPCRoute"} {
			yml := "apiVersion: gateway.networking.k8s.io/v1\nkind: " + kind + "\nmetadata:\n  name: r\n  annotations:\n" +
				"    retry.linkerd.io/http: " + quote(http) + "\n    retry.linkerd.io/grpc: " + quote(http) +
				"\n    retry.linkerd.io/limit: " + quote(limit) + "\n    retry.linkerd.io/timeout: " + quote(retryTimeout) +
				"\n    timeout.linkerd.io/request: " + quote(request) + "\nspec:\n  rules: [{}]\n"
			checkParse(t, []byte(yml))
		}
	})
}

// quote writes s as a YAML double-quoted string.
func quote(s string) string {
	b := []byte{'"'}
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r < 0x20 || r == 0x7f:
			b = append(b, []byte("\\x")...)
			b = append(b, "0123456789abcdef"[r>>4], "0123456789abcdef"[r&15])
		default:
			b = append(b, string(r)...)
		}
	}
	return string(append(b, '"'))
}
