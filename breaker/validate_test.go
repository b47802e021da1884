package breaker_test

import (
	"errors"
	"testing"
	"time"

	"github.com/backstop-go/backstop/breaker"
)

// TestNew_ReportsEveryBadField guards that New names every bad field at once, not
// only the first it meets.
func TestNew_ReportsEveryBadField(t *testing.T) {
	tests := []struct {
		about string
		name  string
		o     breaker.Options
		want  []string // one error per bad field, in this order
	}{
		{"ratio mode, every field bad", "db", breaker.Options{
			FailureRatio: 1.5, ConsecutiveFailures: 3, Window: -time.Second, Buckets: -1,
			OpenTimeout: -time.Second, MaxOpenTimeout: -time.Second, OpenJitter: 2,
			SlowStart: -time.Second, SlowCall: -time.Second,
		}, []string{
			"breaker: invalid options: db: FailureRatio is 1.5; want a number in (0, 1]",
			"breaker: invalid options: db: ConsecutiveFailures and FailureRatio are both set; choose one way to trip",
			"breaker: invalid options: db: Window is -1s; want > 0, or 0 for the default 10s",
			"breaker: invalid options: db: Buckets is -1; want ≥ 1, or 0 for the default 10",
			"breaker: invalid options: db: OpenTimeout is -1s; want > 0, or 0 for the default 750ms",
			"breaker: invalid options: db: MaxOpenTimeout is -1s; want ≥ OpenTimeout, or 0 for the default 750ms",
			"breaker: invalid options: db: OpenJitter is 2; want a fraction in [0, 1], 0 for the default 0.1, or negative for none",
			"breaker: invalid options: db: SlowStart is -1s; want > 0, or 0 for none",
			"breaker: invalid options: db: SlowCall is -1s; want > 0, or 0 for none",
		}},
		{"consecutive mode with ratio-mode fields", "db", breaker.Options{
			MinRequests: 10, Window: time.Second, Buckets: 5,
		}, []string{
			"breaker: invalid options: db: MinRequests is set without FailureRatio; it applies to ratio mode only",
			"breaker: invalid options: db: Window is set without FailureRatio; it applies to ratio mode only",
			"breaker: invalid options: db: Buckets is set without FailureRatio; it applies to ratio mode only",
		}},
		{"no name, and MaxOpenTimeout below the default OpenTimeout", "", breaker.Options{
			MaxOpenTimeout: 500 * time.Millisecond, FailureRatio: 0.5, Window: 5,
		}, []string{
			"breaker: invalid options: the name is empty; want the dependency's name",
			"breaker: invalid options: Window 5ns is shorter than 10 buckets of 1ns",
			"breaker: invalid options: MaxOpenTimeout is 500ms, below OpenTimeout 750ms; want MaxOpenTimeout ≥ OpenTimeout",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.about, func(t *testing.T) {
			tt.o.Name = tt.name
			b, err := breaker.New(tt.o)
			if b != nil || !errors.Is(err, breaker.ErrInvalidOptions) {
				t.Fatalf("New(%q, %+v) = %v, %v; want nil and ErrInvalidOptions", tt.name, tt.o, b, err)
			}
			joined, ok := err.(interface{ Unwrap() []error })
			if !ok {
				t.Fatalf("New(%q, …) = %T; want an errors.Join of one error per field", tt.name, err)
			}
			errs := joined.Unwrap()
			if len(errs) != len(tt.want) {
				t.Fatalf("New(%q, …) reported %d problems:\n%v\nwant %d", tt.name, len(errs), err, len(tt.want))
			}
			for i, e := range errs {
				if !errors.Is(e, breaker.ErrInvalidOptions) || e.Error() != tt.want[i] {
					t.Errorf("New(%q, …) problem %d = %q; want %q, matching ErrInvalidOptions", tt.name, i, e, tt.want[i])
				}
			}
		})
	}
}

// TestNew_OneBadFieldReadsAsBefore guards the message of a lone problem: the join
// adds nothing to it.
func TestNew_OneBadFieldReadsAsBefore(t *testing.T) {
	_, err := breaker.New(breaker.Options{Name: "db", FailureRatio: 1.5})
	want := "breaker: invalid options: db: FailureRatio is 1.5; want a number in (0, 1]"
	if err == nil || err.Error() != want {
		t.Errorf("New(\"db\", {FailureRatio: 1.5}) = %v; want %q", err, want)
	}
}
