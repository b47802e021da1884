package coalesce_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backstop-go/backstop/coalesce"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// A hundred callers ask for the same cold key at once: the origin is called once, and
// every caller gets its value. The origin calls run through the dependency's pipeline.
func Example() {
	var loads atomic.Int32
	release := make(chan struct{})
	p := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: time.Second})), policy.Must(retry.New(retry.Options{})), policy.Name("users")))
	users, err := coalesce.New(coalesce.Options[int, string]{
		Load: func(ctx context.Context, id int) (string, error) {
			loads.Add(1)
			<-release // the origin is slow: every caller arrives while it loads
			return fmt.Sprintf("user %d", id), nil
		},
		Pipeline: p,
		TTL:      time.Minute,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer users.Close()

	var wg sync.WaitGroup
	got := make([]string, 100)
	for i := range got {
		wg.Go(func() { got[i], _ = users.Get(context.Background(), 7) })
	}
	for users.Stats().CoalescedWaits+users.Stats().Misses < 100 { // every caller is waiting
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	fmt.Println(got[0], got[99], "- origin calls:", loads.Load())
	v, _ := users.Get(context.Background(), 7)
	fmt.Println(v, "- a hit; origin calls:", loads.Load())
	// Output:
	// user 7 user 7 - origin calls: 1
	// user 7 - a hit; origin calls: 1
}
