package connectpolicy_test

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/backstop-go/backstop/adapters/connectpolicy"
	"github.com/backstop-go/backstop/fault"
)

// FuzzPushback checks the pushback a classified error carries against strconv: a
// non-negative decimal count of milliseconds is waited exactly (saturating), and
// anything else forbids the retry.
func FuzzPushback(f *testing.F) {
	for _, s := range []string{
		"250",                     // a delay
		"0",                       // retry at once
		" 7 ",                     // spaces around
		"-1",                      // do not retry
		"1e3",                     // not decimal digits
		"",                        // empty
		"99999999999999999999999", // beyond uint64: saturates
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		err := connect.NewError(connect.CodeUnavailable, errors.New("x"))
		err.Meta()[connectpolicy.HeaderPushback] = []string{v}
		m := fault.Of(connectpolicy.Classify(err))
		trimmed := strings.TrimSpace(v)
		ms, perr := strconv.ParseUint(trimmed, 10, 64)
		switch {
		case trimmed == "" || (perr != nil && !errors.Is(perr, strconv.ErrRange)):
			if !m.Stop {
				t.Fatalf("pushback %q: marks %+v, want a stop", v, m)
			}
		default:
			want := time.Duration(math.MaxInt64)
			if perr == nil && ms <= math.MaxInt64/uint64(time.Millisecond) {
				want = time.Duration(ms) * time.Millisecond
			}
			if !m.Exact || m.Hint != want {
				t.Fatalf("pushback %q: marks %+v, want exactly %v", v, m, want)
			}
		}
	})
}
