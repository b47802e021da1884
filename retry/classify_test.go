package retry_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }
func (timeoutErr) Timeout() bool { return true }

func TestDefaultShouldRetry(t *testing.T) {
	plain := errors.New("plain")
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain error", plain, false},
		{"marked", fault.Retryable(plain), true},
		{"marked, wrapped by the caller", fmt.Errorf("load: %w", fault.Retryable(plain)), true},
		{"hint", fault.After(plain, time.Second), true},
		{"timeout", timeoutErr{}, true},
		{"net.OpError timeout", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, true},
		{"connection refused", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"broken pipe", syscall.EPIPE, true},
		{"dns temporary", &net.DNSError{Err: "server misbehaving", IsTemporary: true}, true},
		{"dns not found", &net.DNSError{Err: "no such host", IsNotFound: true}, false},
		{"permission denied", syscall.EACCES, false},
		{"caller cancelled", context.Canceled, false},
		{"caller cancelled, marked", fault.Retryable(context.Canceled), false},
		{"rejected", policy.ErrRejected, false},
		{"rejected, marked", fault.Retryable(fmt.Errorf("open: %w", policy.ErrRejected)), false},
		{"permanent", fault.Permanent(syscall.ECONNRESET), false},
		{"permanent, marked retryable", fault.Retryable(fault.Permanent(errors.New("x"))), false},
	}
	for _, tt := range tests {
		if got := retry.DefaultShouldRetry(tt.err); got != tt.want {
			t.Errorf("DefaultShouldRetry(%s: %v) = %v; want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

func TestMarkers_NilInNilOut(t *testing.T) {
	if fault.Retryable(nil) != nil {
		t.Error("Retryable(nil) != nil")
	}
	if fault.Permanent(nil) != nil {
		t.Error("Permanent(nil) != nil")
	}
	if fault.After(nil, time.Second) != nil {
		t.Error("After(nil, 1s) != nil")
	}
}

func TestMarkers_KeepTheErrorChain(t *testing.T) {
	base := errors.New("503")
	err := fmt.Errorf("call: %w", fault.After(base, 2*time.Second))
	if !errors.Is(err, base) {
		t.Errorf("errors.Is(After(base), base) = false")
	}
	if err.Error() != "call: 503" {
		t.Errorf("After(base).Error() = %q; want the base text", err)
	}
	if d, ok := fault.Hint(err); !ok || d != 2*time.Second {
		t.Errorf("Hint = %v, %v; want 2s, true", d, ok)
	}
	if _, ok := fault.Hint(fault.Retryable(base)); ok {
		t.Error("Hint(Retryable(base)) found a hint")
	}
	if _, ok := fault.Hint(fault.After(base, -time.Second)); ok {
		t.Error("Hint(After(base, -1s)) found a hint")
	}
}
