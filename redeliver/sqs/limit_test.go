package sqs_test

import (
	"context"
	"testing"
	"time"

	"github.com/backstop-go/backstop/policy"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/redeliver"
	"github.com/backstop-go/backstop/redeliver/sqs"
	"github.com/backstop-go/backstop/retry"
)

// longPolicy decides a 12-hour delay for every retryable failure.
func longPolicy() *redeliver.Schedule {
	return policy.Must(redeliver.New(redeliver.Options{Base: 12 * time.Hour, Cap: 12 * time.Hour, Strategy: retry.None{},
		MaxDelay: redeliver.SQSMaxDelay}))
}

func TestConsumer_ADelayEndsWithinTwelveHoursOfTheReceive(t *testing.T) {
	for _, tt := range []struct {
		name      string
		policy    *redeliver.Schedule
		handler   time.Duration // how long the handler runs
		want      int           // the visibility timeout asked, s
		shortened bool
	}{
		// 43 200 s − 90 s the handler ran − 60 s LimitMargin.
		{"a 12 h delay after a 90 s handler", longPolicy(), 90 * time.Second, 43050, true},
		{"a 12 h delay after an instant handler", longPolicy(), 0, 43140, true},
		// 43 200 − 43 170 − 60 < 0: nothing left but to be visible at once.
		{"a 12 h delay after an 11 h 59 m 30 s handler", longPolicy(), 43170 * time.Second, 0, true},
		// Base 10 s, Full jitter at 0.5: 5 s, well inside the limit.
		{"a 5 s delay after a 90 s handler", jobPolicy(), 90 * time.Second, 5, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, client := setup(t)
			var got []redeliver.Decision
			c, err := sqs.New(client, tt.policy, func(context.Context, types.Message) error {
				f.advance(tt.handler)
				return errJob
			}, sqs.Options{QueueURL: jobs, DeadLetterURL: dlq, Clock: f.clock,
				OnDecide: func(_ types.Message, _ int, d redeliver.Decision) { got = append(got, d) }})
			require.NoError(t, err)
			id := f.put(jobs, "render report 7", nil)
			require.NoError(t, c.Process(context.Background(), receive(t, client)[0]), "SQS accepts the visibility timeout")
			require.Equal(t, []int{tt.want}, f.delays[id], "the visibility timeout asked of SQS")
			require.Len(t, got, 1)
			require.True(t, got[0].Retry)
			require.Equal(t, time.Duration(tt.want)*time.Second, got[0].Delay, "the decision says what was asked")
			want := sqs.Stats{Deliveries: 1, Retried: 1}
			if tt.shortened {
				want.Shortened = 1
			}
			require.Equal(t, want, c.Stats())
		})
	}
}

func TestConsumer_RunCountsABatchsTwelveHoursFromItsReceive(t *testing.T) {
	f, client := setup(t)
	decided := make(chan redeliver.Decision, 2)
	handled := 0
	c, err := sqs.New(client, longPolicy(), func(context.Context, types.Message) error {
		handled++
		if handled == 1 {
			f.advance(2 * time.Hour) // the first message's handler; the second waits for it
		} else {
			f.advance(90 * time.Second)
		}
		return errJob
	}, sqs.Options{QueueURL: jobs, DeadLetterURL: dlq, Clock: f.clock, WaitTime: time.Second,
		OnDecide: func(_ types.Message, _ int, d redeliver.Decision) { decided <- d }})
	require.NoError(t, err)
	first, second := f.put(jobs, "job 1", nil), f.put(jobs, "job 2", nil)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error)
	go func() { ran <- c.Run(ctx) }()
	d1, d2 := <-decided, <-decided
	cancel()
	require.ErrorIs(t, <-ran, context.Canceled)
	// Both were received at 0: 43 200 − 7 200 − 60, and 43 200 − 7 290 − 60.
	require.Equal(t, []int{35940}, f.delays[first])
	require.Equal(t, []int{35850}, f.delays[second], "the second message's hours ran while it waited for the first")
	require.Equal(t, 35940*time.Second, d1.Delay)
	require.Equal(t, 35850*time.Second, d2.Delay)
	require.Equal(t, sqs.Stats{Deliveries: 2, Retried: 2, Shortened: 2}, c.Stats())
}
