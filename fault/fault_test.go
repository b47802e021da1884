package fault_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/backstop-go/backstop/fault"
)

var errBoom = errors.New("boom")

func TestMarks_NilInNilOut(t *testing.T) {
	for name, mark := range map[string]func(error) error{
		"Retryable": fault.Retryable,
		"Permanent": fault.Permanent,
		"Client":    fault.Client,
		"After":     func(err error) error { return fault.After(err, time.Second) },
		"Refused":   func(err error) error { return fault.Refused(err, time.Second) },
		"Pushback":  func(err error) error { return fault.Pushback(err, time.Second) },
	} {
		if got := mark(nil); got != nil {
			t.Errorf("%s(nil) = %v, want nil", name, got)
		}
		wrapped := fmt.Errorf("caller: %w", mark(errBoom))
		if !errors.Is(wrapped, errBoom) || wrapped.Error() != "caller: boom" {
			t.Errorf("%s(boom), wrapped = %q; errors.Is(boom) = %v, want true and the same text", name, wrapped, errors.Is(wrapped, errBoom))
		}
	}
}

func TestOf_ReadsEveryMarkThroughWrapping(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want fault.Marks
	}{
		{"unmarked", errBoom, fault.Marks{}},
		{"retryable", fault.Retryable(errBoom), fault.Marks{Retryable: true}},
		{"after 2s", fault.After(errBoom, 2*time.Second), fault.Marks{Retryable: true, Hint: 2 * time.Second, HasHint: true}},
		{"after 0 is retryable", fault.After(errBoom, 0), fault.Marks{Retryable: true}},
		{"after −1s is retryable", fault.After(errBoom, -time.Second), fault.Marks{Retryable: true}},
		{"refused 1s", fault.Refused(errBoom, time.Second), fault.Marks{Retryable: true, Hint: time.Second, HasHint: true, Refused: true}},
		{"pushback 0 is a hint of 0", fault.Pushback(errBoom, 0), fault.Marks{Retryable: true, HasHint: true, Exact: true}},
		{"pushback 300ms", fault.Pushback(errBoom, 300*time.Millisecond), fault.Marks{Retryable: true, Hint: 300 * time.Millisecond, HasHint: true, Exact: true}},
		{"pushback −1 says stop", fault.Pushback(errBoom, -1), fault.Marks{Stop: true}},
		{"permanent retryable", fault.Permanent(fault.Retryable(errBoom)), fault.Marks{Retryable: true, Permanent: true}},
		{"client refused", fault.Client(fault.Refused(errBoom, time.Second)), fault.Marks{Retryable: true, Hint: time.Second, HasHint: true, Refused: true, Client: true}},
		{"outermost hint wins", fault.After(fault.Retryable(errBoom), time.Second), fault.Marks{Retryable: true, Hint: time.Second, HasHint: true}},
		{"through fmt wrapping", fmt.Errorf("get: %w", fault.Client(errBoom)), fault.Marks{Client: true}},
		{"nil", nil, fault.Marks{}},
	} {
		if got := fault.Of(tt.err); got != tt.want {
			t.Errorf("%s: Of = %+v, want %+v", tt.name, got, tt.want)
		}
		d, ok := fault.Hint(tt.err)
		if d != tt.want.Hint || ok != tt.want.HasHint {
			t.Errorf("%s: Hint = %v, %v; want %v, %v", tt.name, d, ok, tt.want.Hint, tt.want.HasHint)
		}
	}
}

// TestThrottled: a throttling answer is retryable and says so, under any hint marked
// outside it, and Throttled(nil) is nil.
func TestThrottled(t *testing.T) {
	err := errors.New("ThrottlingException")
	m := fault.Of(fault.Throttled(err))
	if !m.Retryable || !m.Throttled || m.HasHint {
		t.Errorf("Of(Throttled(err)) = %+v; want Retryable and Throttled, no hint", m)
	}
	m = fault.Of(fault.Pushback(fault.Throttled(err), time.Second))
	if !m.Throttled || !m.Exact || m.Hint != time.Second {
		t.Errorf("Of(Pushback(Throttled(err), 1s)) = %+v; want Throttled with the exact hint", m)
	}
	if !errors.Is(fault.Throttled(err), err) {
		t.Error("Throttled(err) does not match err")
	}
	if fault.Throttled(nil) != nil {
		t.Error("Throttled(nil) != nil")
	}
	if fault.Of(fault.Retryable(err)).Throttled {
		t.Error("Retryable(err) reads as Throttled")
	}
}
