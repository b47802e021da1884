package policy

import (
	"fmt"
	"runtime/debug"
)

// PanicError is what a panic in user code becomes on a goroutine Backstop started.
// Such a goroutine runs a coalesce load or refresh, or a hedged attempt. No caller
// could recover a panic there, and it would end the process. Every caller waiting
// for that work receives the PanicError as its error. The stage that recovered it
// reports an [event.Panic]. A panic on the caller's own goroutine is never
// recovered: it propagates unchanged.
//
// Error gives the value and the stack, as the runtime prints an unrecovered panic.
// Unwrap returns Value if it is an error. Build one with [NewPanicError].
type PanicError struct {
	Value any    // what panic was called with
	Stack []byte // the panicking goroutine's stack (runtime/debug.Stack)
}

// NewPanicError returns a PanicError for v with the current goroutine's stack. Call it
// in the deferred function that recovered v, so the stack shows where the panic was.
func NewPanicError(v any) *PanicError { return &PanicError{Value: v, Stack: debug.Stack()} }

func (e *PanicError) Error() string {
	return fmt.Sprintf("panic: %v [recovered]\n\n%s", e.Value, e.Stack)
}

// Unwrap returns Value if it is an error, else nil.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
