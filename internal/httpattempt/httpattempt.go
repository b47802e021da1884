// Package httpattempt reads the attempt headers of an HTTP request for the two
// server middlewares that need them, policyhttp.Middleware and shed.Middleware.
package httpattempt

import (
	"net/http"

	"github.com/backstop-go/backstop/policy"
)

// FromHeader reads Backstop's, Envoy's and gRPC's attempt headers with
// policy.ParseAttempt. It indexes the header map with the canonical names directly,
// skipping Header.Get's canonicalisation (a third of the shedder's admit path).
func FromHeader(h http.Header) (int, bool) {
	return policy.ParseAttempt(
		first(h, policy.HeaderAttempt),
		first(h, policy.HeaderEnvoyAttempt),
		first(h, policy.HeaderGRPCPreviousAttempts))
}

func first(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
