package coalesce_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/coalesce"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
)

// hanging is an origin that answers only when its load's context ends.
func hanging(ctx context.Context, _ string) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}

// giveUp runs one caller per key, each with a 1 ms timeout, and returns once all have
// given up.
func giveUp(t *testing.T, c *coalesce.Cache[string, string], keys []string) {
	t.Helper()
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			defer cancel()
			if _, err := c.Get(ctx, k); err != context.DeadlineExceeded {
				t.Errorf("Get(1 ms timeout, hanging origin) = %v; want context.DeadlineExceeded", err)
			}
		})
	}
	wg.Wait()
}

// inCache counts the goroutines running the cache's code (its loads, and whatever a
// caller left behind), from a dump of every goroutine's stack.
func inCache() (n int) {
	buf := make([]byte, 1<<20)
	for {
		if k := runtime.Stack(buf, true); k < len(buf) {
			buf = buf[:k]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "backstop/coalesce.(*Cache") {
			n++
		}
	}
	return n
}

// TestGet_CallersWhoGiveUpLeaveNoGoroutine: 20 000 callers (5 000 under the race
// detector) of one key whose origin hangs give up after 1 ms; the one load goroutine
// is all that is left, and DefaultLoadTimeout ends it.
func TestGet_CallersWhoGiveUpLeaveNoGoroutine(t *testing.T) {
	n := 20_000
	if raceEnabled {
		n = 5_000
	}
	synctest.Test(t, func(t *testing.T) {
		c := policy.Must(coalesce.New(coalesce.Options[string, string]{Load: hanging}))
		defer c.Close()
		keys := make([]string, n)
		for i := range keys {
			keys[i] = "hot"
		}
		giveUp(t, c, keys)
		synctest.Wait()
		left := inCache()
		t.Logf("%d callers gave up: %d goroutines left", n, left)
		require.LessOrEqual(t, left, 1, "goroutines left after %d callers of one key gave up; want the one load at most", n)

		time.Sleep(coalesce.DefaultLoadTimeout) // the load's own timeout
		synctest.Wait()
		require.Equal(t, 0, inCache(), "goroutines left after DefaultLoadTimeout")
		require.Equal(t, uint64(1), c.Stats().Refreshes, "origin calls for %d callers", n)
	})
}

// TestGet_DistinctKeysGivenUpLeaveOneLoadEach: 5 000 distinct keys (3 000 under the race
// detector) with MaxEntries 10, each asked by one caller that gives up after 1 ms,
// leave one load goroutine per key (not two goroutines), until DefaultLoadTimeout.
func TestGet_DistinctKeysGivenUpLeaveOneLoadEach(t *testing.T) {
	n := 5_000
	if raceEnabled {
		n = 3_000
	}
	synctest.Test(t, func(t *testing.T) {
		c := policy.Must(coalesce.New(coalesce.Options[string, string]{Load: hanging, MaxEntries: 10}))
		defer c.Close()
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprint("key-", i)
		}
		giveUp(t, c, keys)
		synctest.Wait()
		left := inCache()
		t.Logf("%d callers of distinct keys gave up: %d goroutines left", n, left)
		require.LessOrEqual(t, left, n, "goroutines left after %d callers of distinct keys gave up; want one load per key at most", n)

		time.Sleep(coalesce.DefaultLoadTimeout)
		synctest.Wait()
		require.Equal(t, 0, inCache(), "goroutines left after DefaultLoadTimeout")
		require.LessOrEqual(t, c.Len(), 10, "entries held with MaxEntries 10")
	})
}

// TestNew_LoadTimeout: the timeout a load runs under, by Options. A load with nothing
// to bound it gets DefaultLoadTimeout; a pipeline's deadline, or a per-attempt timeout,
// is left to bound it alone; a positive LoadTimeout bounds every load; a negative one
// none.
func TestNew_LoadTimeout(t *testing.T) {
	withBreaker := func() *policy.Pipeline {
		return policy.Must(policy.Wrap(policy.Must(breaker.New(breaker.Options{Name: "origin"}))))
	}
	for _, tc := range []struct {
		name     string
		pipeline func() *policy.Pipeline
		timeout  time.Duration // Options.LoadTimeout
		want     time.Duration // the load's deadline, from its start; 0: none
	}{
		{"no pipeline: the default", nil, 0, coalesce.DefaultLoadTimeout},
		{"a pipeline with no deadline: the default", withBreaker, 0, coalesce.DefaultLoadTimeout},
		{"a pipeline's deadline alone", func() *policy.Pipeline {
			return policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: time.Minute}))))
		}, 0, time.Minute},
		{"LoadTimeout, shorter than the pipeline's deadline", func() *policy.Pipeline {
			return policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: time.Minute}))))
		},
			time.Second, time.Second},
		{"LoadTimeout with no pipeline", nil, 3 * time.Second, 3 * time.Second},
		{"negative: none", nil, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := coalesce.Options[string, time.Duration]{LoadTimeout: tc.timeout, Load: func(ctx context.Context, _ string) (time.Duration, error) {
					d, ok := ctx.Deadline()
					if !ok {
						return 0, nil
					}
					return time.Until(d), nil
				}}
				if tc.pipeline != nil {
					o.Pipeline = tc.pipeline()
				}
				c := policy.Must(coalesce.New(o))
				defer c.Close()
				got, err := c.Get(context.Background(), "k")
				require.NoError(t, err)
				require.Equal(t, tc.want, got, "time left to a load with LoadTimeout %v", tc.timeout)
			})
		})
	}
}
