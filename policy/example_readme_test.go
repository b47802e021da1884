package policy_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// User is what the examples load.
type User struct{ Name string }

// userDB stands for a database client.
type userDB struct{}

func (userDB) Ping(context.Context) error { return nil }

func (userDB) LoadUser(_ context.Context, id int) (User, error) {
	return User{Name: fmt.Sprint("user ", id)}, nil
}

// The README's first stack: an overall deadline, a breaker and a retry, named "db",
// and a call that returns a value.
func Example_readme() {
	ctx, db, id := context.Background(), userDB{}, 7
	overall := policy.Must(deadline.New(deadline.Options{Timeout: 2 * time.Second}))
	brk := policy.Must(breaker.New(breaker.Options{Name: "db"}))
	rt := policy.Must(retry.New(retry.Options{MaxAttempts: 3}))

	// outermost first: deadline(breaker(retry(fn))); options such as Name go among the stages
	p, err := policy.Wrap(overall, brk, rt, policy.Name("db"))
	if err != nil {
		log.Fatal(err) // e.g. "policy: O1: deadline at position 3 is inside retry at position 2; …"
	}

	user, err := policy.Get(ctx, p, func(ctx context.Context) (User, error) {
		return db.LoadUser(ctx, id)
	})
	fmt.Println(user.Name, err)
	// Output: user 7 <nil>
}

// The package documentation's composition, with a budget, a per-attempt timeout and
// an observer: Do for a call that returns only an error, Get for one that returns a
// value.
func Example_composition() {
	if err := composition(context.Background(), userDB{}, 7, event.ObserverFunc(func(event.Event) {})); err != nil {
		fmt.Println(err)
	}
	// Output: user 7
}

func composition(ctx context.Context, db userDB, id int, obs event.Observer) error {
	overall := policy.Must(deadline.New(deadline.Options{Timeout: 2 * time.Second}))
	perTry := policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 300 * time.Millisecond}))
	brk := policy.Must(breaker.New(breaker.Options{Name: "db"}))
	bud := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1}))
	rt := policy.Must(retry.New(retry.Options{MaxAttempts: 3}))

	p, err := policy.Wrap(overall, brk, bud, rt, perTry, policy.Name("db"), policy.Observe(obs))
	if err != nil {
		return err // a wrong order is refused here, never at call time
	}

	err = p.Do(ctx, func(ctx context.Context) error {
		return db.Ping(ctx)
	})
	if err != nil {
		return err
	}
	user, err := policy.Get(ctx, p, func(ctx context.Context) (User, error) {
		return db.LoadUser(ctx, id)
	})
	fmt.Println(user.Name)
	return err
}
