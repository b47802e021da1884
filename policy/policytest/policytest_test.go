package policytest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
)

// sleeper waits a fixed time before each call, ignoring ctx: it breaks the rule that
// Run honours ctx.
type sleeper struct{}

func (sleeper) Placement() policy.Placement { return policy.Placement{Kind: "test_stage"} }
func (sleeper) Bind(next policy.Runner, _ policy.Env) policy.Runner {
	return policy.RunnerFunc(func(ctx context.Context, fn policy.Func) error {
		time.Sleep(50 * time.Millisecond)
		return next.Run(ctx, fn)
	})
}

// canceller hands fn a context it cancels when Run returns, even when the caller's
// context carries a Releaser: it breaks the Releaser rule.
type canceller struct{}

func (canceller) Placement() policy.Placement { return policy.Placement{Kind: "test_stage"} }
func (canceller) Bind(next policy.Runner, _ policy.Env) policy.Runner {
	return policy.RunnerFunc(func(ctx context.Context, fn policy.Func) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		return next.Run(ctx, fn)
	})
}

// passThrough keeps every rule.
type passThrough struct{}

func (passThrough) Placement() policy.Placement                         { return policy.Placement{Kind: "test_stage"} }
func (passThrough) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }

const brokenEnv = "POLICYTEST_BROKEN"

// TestBrokenPolicy runs the suite on a broken policy when asked to by
// TestRun_FailsBrokenPolicies, which runs it in a child process and reads its verdict.
func TestBrokenPolicy(t *testing.T) {
	switch os.Getenv(brokenEnv) {
	case "sleeper":
		policytest.Run(t, func() policy.Policy { return sleeper{} })
	case "canceller":
		policytest.Run(t, func() policy.Policy { return canceller{} })
	default:
		t.Skip("run by TestRun_FailsBrokenPolicies")
	}
}

func TestRun_FailsBrokenPolicies(t *testing.T) {
	if os.Getenv(brokenEnv) != "" {
		t.Skip("inside the child process")
	}
	for _, tt := range []struct {
		broken, subtest, rule string
	}{
		{"sleeper", "HonoursContext", "must honour ctx"},
		{"canceller", "ReleaserKeepsContext", "the Releaser rule"},
	} {
		t.Run(tt.broken, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenPolicy$/^"+tt.subtest+"$", "-test.v")
			cmd.Env = append(os.Environ(), brokenEnv+"="+tt.broken)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("policytest.Run passed the %s policy; want it to fail\n%s", tt.broken, out)
			}
			if !strings.Contains(string(out), "--- FAIL: TestBrokenPolicy/"+tt.subtest) || !strings.Contains(string(out), tt.rule) {
				t.Errorf("policytest.Run on the %s policy: want subtest %s to fail saying %q; got\n%s", tt.broken, tt.subtest, tt.rule, out)
			}
		})
	}
}

func TestRun_PassesAPolicyThatKeepsTheRules(t *testing.T) {
	policytest.Run(t, func() policy.Policy { return passThrough{} })
}
