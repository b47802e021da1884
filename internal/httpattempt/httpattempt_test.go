package httpattempt_test

import (
	"net/http"
	"testing"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/internal/httpattempt"
)

// TestHeadersAreCanonical guards the direct map lookups.
func TestHeadersAreCanonical(t *testing.T) {
	for _, k := range []string{callpath.HeaderAttempt, callpath.HeaderEnvoyAttempt, callpath.HeaderGRPCPreviousAttempts} {
		if c := http.CanonicalHeaderKey(k); c != k {
			t.Errorf("header %q is not canonical (%q)", k, c)
		}
	}
}

func TestFromHeader(t *testing.T) {
	h := http.Header{}
	if _, ok := httpattempt.FromHeader(h); ok {
		t.Error("FromHeader(no headers) ok")
	}
	h.Set(callpath.HeaderEnvoyAttempt, "3")
	h.Set(callpath.HeaderGRPCPreviousAttempts, "junk")
	if n, ok := httpattempt.FromHeader(h); !ok || n != 3 {
		t.Errorf("FromHeader(envoy 3, grpc junk) = %d, %v; want 3, true", n, ok)
	}
}

func TestFromHeader_OtherHeadersOnly(t *testing.T) {
	h := http.Header{"User-Agent": {"x"}, "Accept": {"*/*"}}
	if n, ok := httpattempt.FromHeader(h); ok || n != 0 {
		t.Errorf("FromHeader(no attempt header) = %d, %v; want 0, false", n, ok)
	}
	h.Set(callpath.HeaderAttempt, "2")
	if n, ok := httpattempt.FromHeader(h); !ok || n != 2 {
		t.Errorf("FromHeader(backstop 2) = %d, %v; want 2, true", n, ok)
	}
}
