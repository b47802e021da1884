package policy_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/backstop-go/backstop/event"

	"github.com/backstop-go/backstop/policy"
)

func recovered(f func()) (pe *policy.PanicError) {
	defer func() { pe = policy.NewPanicError(recover()) }()
	f()
	return nil
}

func panicsWithEOF() { panic(io.EOF) }

func TestPanicError_CarriesValueAndStack(t *testing.T) {
	pe := recovered(panicsWithEOF)
	if pe.Value != io.EOF {
		t.Errorf("PanicError.Value = %v, want io.EOF", pe.Value)
	}
	if !strings.Contains(string(pe.Stack), "panicsWithEOF") {
		t.Errorf("PanicError.Stack does not name the panicking function:\n%s", pe.Stack)
	}
	if !strings.HasPrefix(pe.Error(), "panic: EOF [recovered]") || !strings.Contains(pe.Error(), "panicsWithEOF") {
		t.Errorf("PanicError.Error() = %q, want the value then the stack", pe.Error())
	}
	if !errors.Is(pe, io.EOF) {
		t.Error("errors.Is(PanicError{io.EOF}, io.EOF) = false, want true")
	}
	if err := recovered(func() { panic("boom") }).Unwrap(); err != nil {
		t.Errorf("PanicError{\"boom\"}.Unwrap() = %v, want nil", err)
	}
	if got := event.Panic.String(); got != "panic" {
		t.Errorf("EventPanic.String() = %q, want \"panic\"", got)
	}
}
