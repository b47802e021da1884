package callpath_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/callpath"

	"github.com/backstop-go/backstop/event"

	"github.com/backstop-go/backstop/policy"
)

// loop is a minimal retry used to test the ownership hook: it retries every error up
// to max attempts when it owns the call path, and makes one attempt otherwise. Package
// retry builds the real one on the same hook.
type loop struct{ max int }

func (*loop) Placement() policy.Placement { return policy.Placement{Kind: "retry", OwnsRetries: true} }

func (l *loop) Bind(next policy.Runner, env policy.Env) policy.Runner {
	return policy.RunnerFunc(func(ctx context.Context, fn policy.Func) error {
		if callpath.Owned(ctx) {
			err := next.Run(ctx, fn)
			if err != nil && env.Observer != nil {
				env.Observer.Observe(event.Event{Kind: event.RetrySuppressed, Pipeline: env.Pipeline, Reason: event.SuppressedOwner, Attempt: 1, Err: err})
			}
			return err
		}
		var err error
		for n := 1; n <= l.max; n++ {
			if err = next.Run(callpath.WithAttempt(ctx, n), fn); err == nil {
				return nil
			}
		}
		return err
	})
}

func TestOwnership_NestedRetryingPipelinesMakeOneAttemptEach(t *testing.T) {
	var rec recorder
	db := policy.Must(policy.Wrap(&loop{max: 4})).With(policy.Name("db"), policy.Observe(&rec))
	api := policy.Must(policy.Wrap(&loop{max: 4})).With(policy.Name("api"), policy.Observe(&rec))
	edge := policy.Must(policy.Wrap(&loop{max: 4})).With(policy.Name("edge"))

	dbCalls := 0
	var seen []int
	_ = edge.Do(context.Background(), func(ctx context.Context) error {
		return api.Do(ctx, func(ctx context.Context) error {
			return db.Do(ctx, func(ctx context.Context) error {
				n, upstream, ok := callpath.Attempt(ctx)
				require.True(t, ok && !upstream, "the database call runs under the edge's ownership")
				seen = append(seen, n)
				dbCalls++
				return errBoom
			})
		})
	})
	if dbCalls != 4 {
		t.Errorf("3 layers of 4 attempts each made %d database calls; want 4 (the outer layer owns retries), not 64", dbCalls)
	}
	require.Equal(t, []int{1, 2, 3, 4}, seen, "attempt numbers seen underneath")
	var suppressed int
	for _, e := range rec.events {
		if e.Kind == event.RetrySuppressed {
			require.Equal(t, event.SuppressedOwner, e.Reason)
			suppressed++
		}
	}
	require.Equal(t, 8, suppressed, "each of the 4 edge attempts suppresses api's and db's retries")
}

func TestOwnership_Marks(t *testing.T) {
	ctx := context.Background()
	require.False(t, callpath.Owned(ctx))
	_, _, ok := callpath.Attempt(ctx)
	require.False(t, ok)

	for _, n := range []int{1, 16, 17, 1000} {
		c := callpath.WithAttempt(ctx, n)
		got, upstream, ok := callpath.Attempt(c)
		require.True(t, ok && callpath.Owned(c))
		require.False(t, upstream)
		require.Equal(t, n, got, "Attempt(WithAttempt(ctx, %d))", n)

		u := callpath.WithUpstreamAttempt(ctx, n)
		got, upstream, ok = callpath.Attempt(u)
		require.True(t, ok && upstream && callpath.Owned(u))
		require.Equal(t, n, got)
	}
	n, _, _ := callpath.Attempt(callpath.WithAttempt(ctx, 0))
	require.Equal(t, 1, n, "attempt numbers below 1 are taken as 1")

	// The marks of a bare Background or TODO are made once; they carry nothing else.
	for _, base := range []context.Context{context.Background(), context.TODO()} {
		c := callpath.WithAttempt(base, 3)
		require.Same(t, c, callpath.WithAttempt(base, 3), "WithAttempt(%v, 3) twice", base)
		got, upstream, ok := callpath.Attempt(c)
		require.True(t, ok && !upstream && got == 3, "Attempt(WithAttempt(%v, 3))", base)
		require.Nil(t, c.Done(), "a mark of %v is never cancelled", base)
		_, has := c.Deadline()
		require.False(t, has)
	}
}

func TestParseAttempt(t *testing.T) {
	tests := []struct {
		backstop, envoy, grpc string
		want                  int
		ok                    bool
	}{
		{"", "", "", 0, false},                         // no header: not owned upstream
		{"1", "", "", 1, true},                         // a first attempt under an owner
		{"3", "", "", 3, true},                         //
		{" 2\t", "", "", 2, true},                      // surrounding whitespace
		{"0", "", "", 0, false},                        // 1-based: 0 is invalid
		{"-1", "", "", 0, false},                       // sign
		{"+2", "", "", 0, false},                       //
		{"2.0", "", "", 0, false},                      // fraction
		{"0x10", "", "", 0, false},                     // hex
		{"abc", "", "", 0, false},                      // garbage
		{"1 2", "", "", 0, false},                      // inner space
		{"99999999999999999999999", "", "", 100, true}, // huge: clamped, never overflows
		{"", "2", "", 2, true},                         // Envoy's count is 1-based
		{"", "0", "", 0, false},                        //
		{"", "", "0", 1, true},                         // gRPC counts previous attempts
		{"", "", "2", 3, true},                         //
		{"", "", "100", 100, true},                     // clamped
		{"2", "5", "1", 5, true},                       // the largest wins
		{"junk", "", "1", 2, true},                     // garbage in one header ignores only it
	}
	for _, tt := range tests {
		n, ok := callpath.ParseAttempt(tt.backstop, tt.envoy, tt.grpc)
		if n != tt.want || ok != tt.ok {
			t.Errorf("ParseAttempt(%q, %q, %q) = %d, %v; want %d, %v", tt.backstop, tt.envoy, tt.grpc, n, ok, tt.want, tt.ok)
		}
	}
}

// FuzzParseAttempt checks ParseAttempt against strconv.Atoi on the values Atoi reads
// without a sign, and that it never panics or leaves its range.
func FuzzParseAttempt(f *testing.F) {
	for _, s := range []string{
		"1", "3", " 7 ", "0", "-1", "+1", "1e3", "١", // Arabic-Indic digit one: not ASCII
		"18446744073709551616", "\t42\t", "", " ", "0001",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := callpath.ParseAttempt(s, "", "")
		if ok && (n < 1 || n > callpath.MaxAttempt) {
			t.Fatalf("ParseAttempt(%q) = %d; out of [1, %d]", s, n, callpath.MaxAttempt)
		}
		trimmed := strings.Trim(s, " \t")
		digits := trimmed != "" && strings.Trim(trimmed, "0123456789") == ""
		if ok != (digits && strings.TrimLeft(trimmed, "0") != "") {
			t.Fatalf("ParseAttempt(%q) ok = %v; want %v", s, ok, !ok)
		}
		if v, err := strconv.Atoi(trimmed); err == nil && digits && v >= 1 {
			want := min(v, callpath.MaxAttempt)
			if n != want {
				t.Fatalf("ParseAttempt(%q) = %d; strconv says %d", s, n, want)
			}
		}
	})
}

// recorder is an Observer that keeps every event.
type recorder struct{ events []event.Event }

func (r *recorder) Observe(e event.Event) { r.events = append(r.events, e) }

var errBoom = errors.New("boom")

func TestOutgoing_SendsTheLocalAttemptOrOneUnderAnUpstreamOwner(t *testing.T) {
	ctx := context.Background()
	if n, ok := callpath.Outgoing(ctx); ok {
		t.Fatalf("Outgoing(unowned) = %d, true; want false", n)
	}
	for _, tt := range []struct {
		ctx  context.Context
		want int
	}{
		{callpath.WithAttempt(ctx, 3), 3},          // this process's retry owns the path
		{callpath.WithUpstreamAttempt(ctx, 3), 1},  // another process's retry does: carried on as 1
		{callpath.WithAttempt(ctx, 40), 40},        // past the preallocated marks
		{callpath.WithUpstreamAttempt(ctx, 40), 1}, // the same
	} {
		if n, ok := callpath.Outgoing(tt.ctx); !ok || n != tt.want {
			t.Errorf("Outgoing = %d, %v; want %d, true", n, ok, tt.want)
		}
	}
}
