package coalesce_test

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/backstop-go/backstop/policy"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/coalesce"
)

// tenantKey prints alike for int(7) and int64(7): "{Tenant:7}" under %v and %#v.
type tenantKey struct{ Tenant any }

// TestGet_KeysThatPrintAlikeDoNotShareALoad: a caller asking for {Tenant: int64(7)}
// while {Tenant: int(7)} is loading gets its own load, never the other tenant's value;
// two equal keys still share one load.
func TestGet_KeysThatPrintAlikeDoNotShareALoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		var calls atomic.Int64
		load := func(_ context.Context, k tenantKey) (string, error) {
			calls.Add(1)
			<-gate
			return fmt.Sprintf("%T", k.Tenant), nil
		}
		c := policy.Must(coalesce.New(coalesce.Options[tenantKey, string]{Load: load}))
		defer c.Close()
		got := make([]string, 3)
		done := make(chan struct{}, 3)
		get := func(i int, k tenantKey) {
			go func() {
				v, err := c.Get(context.Background(), k)
				require.NoError(t, err)
				got[i] = v
				done <- struct{}{}
			}()
			synctest.Wait() // the Get has joined or started its load
		}
		get(0, tenantKey{int(7)})
		get(1, tenantKey{int64(7)})
		get(2, tenantKey{int(7)})
		require.Equal(t, int64(2), calls.Load(), "origin calls for int(7), int64(7), int(7) in flight together")
		close(gate)
		for range got {
			<-done
		}
		require.Equal(t, []string{"int", "int64", "int"}, got, "Get(tenantKey{int(7)}), Get(tenantKey{int64(7)}), Get(tenantKey{int(7)})")

		// The entries are apart too.
		v, err := c.Get(context.Background(), tenantKey{int64(7)})
		require.NoError(t, err)
		require.Equal(t, "int64", v, "the cached value of tenantKey{int64(7)}")
		require.Equal(t, int64(2), calls.Load(), "both values were cached")
	})
}

// TestGet_NaNKeyLeavesNoFlight: a key holding a NaN equals no key, itself included; its
// loads are not shared, and none is left behind once they end.
func TestGet_NaNKeyLeavesNoFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		c := policy.Must(coalesce.New(coalesce.Options[float64, int]{MaxEntries: 10,
			Load: func(context.Context, float64) (int, error) { return int(calls.Add(1)), nil }}))
		for range 100 {
			_, err := c.Get(context.Background(), math.NaN())
			require.NoError(t, err)
		}
		c.Close()
		require.Equal(t, int64(100), calls.Load(), "origin calls for 100 Gets of NaN (no NaN equals another)")
		require.LessOrEqual(t, c.Len(), 10, "entries held after 100 NaN keys with MaxEntries 10")
		v, err := c.Get(context.Background(), 1.5)
		require.NoError(t, err)
		require.Equal(t, 101, v, "an ordinary key after the NaNs")
	})
}
