package callpath_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/internal/race"
)

func TestReleaser(t *testing.T) {
	var log []int
	callpath.DeferRelease(context.Background(), func() { log = append(log, 0) })
	require.Equal(t, []int{0}, log, "without a Releaser the function runs at once")

	ctx, r := callpath.WithReleaser(context.Background())
	callpath.DeferRelease(ctx, func() { log = append(log, 1) })
	callpath.DeferRelease(ctx, func() { log = append(log, 2) })
	require.Equal(t, []int{0}, log, "held until Release")
	r.Release()
	require.Equal(t, []int{0, 2, 1}, log, "released innermost first")
	r.Release()
	require.Equal(t, []int{0, 2, 1}, log, "once")
	callpath.DeferRelease(ctx, func() { log = append(log, 3) })
	require.Equal(t, []int{0, 2, 1, 3}, log, "after Release, at once")
}

// TestReleaser_TwoHeldFunctionsAllocateNothing: a deadline and a per-attempt timeout
// hand their cancels to the call's Releaser; holding them costs no allocation beyond
// the context carrying the Releaser, itself one.
func TestReleaser_TwoHeldFunctionsAllocateNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	bg := context.Background()
	nop := func() {}
	floor := testing.AllocsPerRun(1000, func() {
		_, r := callpath.WithReleaser(bg)
		r.Release()
	})
	got := testing.AllocsPerRun(1000, func() {
		ctx, r := callpath.WithReleaser(bg)
		callpath.DeferRelease(ctx, nop)
		callpath.DeferRelease(ctx, nop)
		r.Release()
	})
	if floor > 1 {
		t.Errorf("WithReleaser and Release allocate %v; want 1 (the context carrying the Releaser)", floor)
	}
	if got > floor {
		t.Errorf("WithReleaser, DeferRelease twice, Release allocates %v; want %v, as WithReleaser and Release alone", got, floor)
	}
}
