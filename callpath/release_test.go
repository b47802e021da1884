package callpath_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/callpath"
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
