// Package httpattempt reads the attempt headers of an HTTP request for the two
// server middlewares that need them, policyhttp.Middleware and shed.Middleware. It
// also keeps, for the client transports of policyhttp and policygrpc, one account
// of the attempts a mesh beneath them makes ([Mesh]).
package httpattempt

import (
	"net/http"

	"github.com/backstop-go/backstop/callpath"
)

// FromHeader reads Backstop's, Envoy's and gRPC's attempt headers with
// callpath.ParseAttempt. It indexes the header map with the canonical names directly,
// skipping Header.Get's canonicalisation (a third of the shedder's admit path).
func FromHeader(h http.Header) (int, bool) {
	if len(h) == 0 {
		return 0, false
	}
	backstop, envoy, grpc := first(h, callpath.HeaderAttempt), first(h, callpath.HeaderEnvoyAttempt),
		first(h, callpath.HeaderGRPCPreviousAttempts)
	if backstop == "" && envoy == "" && grpc == "" {
		return 0, false // most requests: no attempt header to parse
	}
	return callpath.ParseAttempt(backstop, envoy, grpc)
}

func first(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
