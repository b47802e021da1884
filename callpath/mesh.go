package callpath

import (
	"errors"
	"strconv"
)

// HeaderEnvoyMaxRetries is Envoy's request header for the most retries its router
// makes of the request. Its value overrides the route's and the virtual host's
// retry policy ("If this header is used, its value takes precedence", Envoy's
// router filter docs, x-envoy-max-retries). A transport sends "0" on every
// attempt made under a Backstop retry owner. So an Envoy sidecar beneath does not
// multiply the owner's attempts. Envoy honours it only from internal
// downstreams; the package documentation of policyhttp says when that is.
const HeaderEnvoyMaxRetries = "X-Envoy-Max-Retries"

// Mesh says who owns the retries between a transport and the server it calls,
// when a service mesh stands between them. Its zero value is [MeshBackstopOwns].
// Transports take it in their Options (policyhttp, policygrpc).
type Mesh uint8

// Who owns the retries beneath a transport.
const (
	// MeshBackstopOwns is the zero value: the retry owner on the call path is
	// Backstop's, and nothing beneath retries. Every attempt made under an owner
	// carries [HeaderEnvoyMaxRetries] "0". A server that is no Envoy ignores it.
	// A response's [HeaderEnvoyAttempt] above 1 says a mesh retried all the same;
	// its extra attempts are counted.
	MeshBackstopOwns Mesh = iota
	// MeshNone says nothing stands beneath. The transport sends no Envoy header
	// and reads none from responses.
	MeshNone
	// MeshEnvoyOwns says an Envoy beneath owns the retries. The pipeline makes
	// one attempt ([WithUpstreamAttempt] marks the call as owned by the mesh). The
	// mesh's attempts are read from the response's [HeaderEnvoyAttempt] and
	// counted. Envoy sends it only with include_attempt_count_in_response set on
	// the route's virtual host. A retry owner further up this process, or in the
	// caller's, still wins: beneath it, the mesh is told not to retry.
	MeshEnvoyOwns
)

// String names m as Go source does: "MeshEnvoyOwns".
func (m Mesh) String() string {
	switch m {
	case MeshBackstopOwns:
		return "MeshBackstopOwns"
	case MeshNone:
		return "MeshNone"
	case MeshEnvoyOwns:
		return "MeshEnvoyOwns"
	}
	return "Mesh(" + strconv.Itoa(int(m)) + ")"
}

// ReasonMesh is the Reason of a retry a mesh made beneath a transport, as the
// transport reports it (event.RetryScheduled with Stage "mesh").
const ReasonMesh = "mesh"

// ErrMeshRetried is the error a transport reports for an attempt a mesh made and
// retried beneath it (event.AttemptEnd with Stage "mesh"). The mesh does not say
// how the attempt failed, only that it retried it.
var ErrMeshRetried = errors.New("callpath: the mesh beneath retried the attempt")
