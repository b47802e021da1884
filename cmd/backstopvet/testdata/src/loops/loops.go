package loops

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"time"
)

func call(ctx context.Context) error { return errors.New("down") }

func fixedInterval(ctx context.Context) error {
	var err error
	for i := 0; i < 5; i++ { // want `retry loop sleeps a fixed interval with no jitter`
		if err = call(ctx); err == nil {
			return nil
		}
		time.Sleep(time.Second)
	}
	return err
}

func forever(c *http.Client) {
	for { // want `retry loop with no attempt bound and no deadline`
		res, err := c.Get("http://example.test")
		if err == nil {
			res.Body.Close()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func timerSelect(ctx context.Context) {
	for n := 1; n <= 4; n++ { // want `retry loop sleeps a fixed interval`
		if call(ctx) == nil {
			return
		}
		select {
		case <-time.After(time.Duration(n) * 50 * time.Millisecond): // exponential, but in step with every client
		case <-ctx.Done():
			return
		}
	}
}

// Jittered: fine.
func jittered(ctx context.Context) {
	for i := 0; i < 5; i++ {
		if call(ctx) == nil {
			return
		}
		time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
	}
}

// A polling loop that calls no dependency: fine.
func poll(done func() bool) {
	for !done() {
		time.Sleep(time.Millisecond)
	}
}

// Deliberate: left alone.
func deliberate(ctx context.Context) {
	//backstopvet:ignore retryloop (a demonstration of the anti-pattern)
	for i := 0; i < 3; i++ {
		_ = call(ctx)
		time.Sleep(time.Second)
	}
}

// Sleeping in a goroutine started by the loop is that goroutine's business.
func spawner(ctx context.Context) {
	for i := 0; i < 3; i++ {
		go func() {
			time.Sleep(time.Second)
		}()
		_ = call(ctx)
	}
}
