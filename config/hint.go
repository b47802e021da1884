package config

import (
	"context"
	"strings"

	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// hintless is a retry with max_hint off: it waits its back-off whatever a server
// asks, as an Envoy route without rate_limited_retry_back_off does. The hint an
// attempt's error carries (Retry-After, gRPC pushback) is taken off before the retry
// sees it; the error stays retryable, and its chain is kept for the caller.
type hintless struct{ *retry.Retry }

// Bind binds the retry over next with the hints taken off next's errors.
func (h *hintless) Bind(next policy.Runner, env policy.Env) policy.Runner {
	return h.Retry.Bind(unhinted{next}, env)
}

// ExplainStage implements policy.StageExplainer: no wait is a server's.
func (h *hintless) ExplainStage() policy.Stage {
	st := h.Retry.ExplainStage()
	st.MaxHint = 0
	if i := strings.Index(st.Summary, "waits a server's hint up to"); i >= 0 {
		rest := st.Summary[i:]
		end := strings.Index(rest, ";")
		if end < 0 {
			end = len(rest)
		}
		st.Summary = st.Summary[:i] + "waits no server hint (max_hint off): the back-off applies whatever a server asks" + rest[end:]
	}
	return st
}

// unhinted runs next and takes the server's hint off a retryable error.
type unhinted struct{ next policy.Runner }

func (u unhinted) Run(ctx context.Context, fn policy.Func) error {
	err := u.next.Run(ctx, fn)
	if m := fault.Of(err); m.HasHint && m.Retryable {
		return fault.Retryable(err) // the outermost mark wins: no hint
	}
	return err
}
