package sqs_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/backstop-go/backstop/policy"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/redeliver"
	"github.com/backstop-go/backstop/redeliver/sqs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	jobs = "http://sqs.test/000000000000/jobs"
	dlq  = "http://sqs.test/000000000000/jobs-dlq"
)

var errJob = errors.New("the invoice service answered 503")

// setup serves a fake SQS with the two queues and returns it with a client of it.
func setup(t *testing.T) (*fakeSQS, *awssqs.Client) {
	t.Helper()
	f := newFakeSQS(jobs, dlq)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c := awssqs.New(awssqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: aws.AnonymousCredentials{}, HTTPClient: srv.Client(), Retryer: aws.NopRetryer{},
		DisableMessageChecksumValidation: true}) // the fake computes no attribute MD5s
	t.Cleanup(srv.CloseClientConnections)
	return f, c
}

// policy is the jobs policy with a pinned draw: delays of half the backoff window.
func jobPolicy() *redeliver.Schedule {
	return policy.Must(redeliver.New(redeliver.Options{MaxDeliveries: 4, MaxDelay: redeliver.SQSMaxDelay, Rand: policytest.NewRand(0.5)}))
}

// receive takes the visible messages of jobs once.
func receive(t *testing.T, c *awssqs.Client) []types.Message {
	t.Helper()
	out, err := c.ReceiveMessage(context.Background(), &awssqs.ReceiveMessageInput{QueueUrl: aws.String(jobs), MaxNumberOfMessages: 10,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount,
			types.MessageSystemAttributeNameApproximateFirstReceiveTimestamp}})
	require.NoError(t, err)
	return out.Messages
}

func TestConsumer_AMessageThatFailsThreeTimesThenSucceeds(t *testing.T) {
	f, client := setup(t)
	failures := 3
	var timeline []string
	c, err := sqs.New(client, jobPolicy(), func(context.Context, types.Message) error {
		if failures > 0 {
			failures--
			return errJob
		}
		return nil
	}, sqs.Options{QueueURL: jobs, DeadLetterURL: dlq, OnDecide: func(_ types.Message, n int, d redeliver.Decision) {
		timeline = append(timeline, fmtDecision(n, d))
	}})
	require.NoError(t, err)
	id := f.put(jobs, "send invoice 42", nil)
	for range 4 {
		ms := receive(t, client)
		require.Len(t, ms, 1)
		require.NoError(t, c.Process(context.Background(), ms[0]))
		f.advance(time.Hour) // past any delay
	}
	require.Equal(t, []string{"receive 1: retry in 5s", "receive 2: retry in 10s", "receive 3: retry in 20s", "receive 4: delete"}, timeline)
	require.Equal(t, []int{5, 10, 20}, f.delays[id], "the visibility timeouts set: a growing delay, not SQS's fixed one")
	require.Empty(t, f.messages(jobs), "deleted once it succeeded")
	require.Equal(t, sqs.Stats{Deliveries: 4, Deleted: 1, Retried: 3}, c.Stats())
}

func fmtDecision(n int, d redeliver.Decision) string {
	switch {
	case d.Retry:
		return "receive " + itoa(n) + ": retry in " + d.Delay.String()
	case d.DeadLetter:
		return "receive " + itoa(n) + ": dead-letter (" + d.Reason + ")"
	}
	return "receive " + itoa(n) + ": delete"
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestConsumer_DeadLettersAfterMaxDeliveriesWithItsHistory(t *testing.T) {
	f, client := setup(t)
	c, err := sqs.New(client, jobPolicy(), func(context.Context, types.Message) error { return errJob },
		sqs.Options{QueueURL: jobs, DeadLetterURL: dlq})
	require.NoError(t, err)
	id := f.put(jobs, "sync crm 3", map[string]attrValue{"tenant": {DataType: "String", StringValue: "acme"}})
	for range 4 {
		ms := receive(t, client)
		require.Len(t, ms, 1)
		require.NoError(t, c.Process(context.Background(), ms[0]))
		f.advance(time.Hour)
	}
	require.Empty(t, f.messages(jobs))
	dead := f.messages(dlq)
	require.Len(t, dead, 1)
	require.Equal(t, "sync crm 3", dead[0].body)
	a := dead[0].attrs
	require.Equal(t, "acme", a["tenant"].StringValue, "its own attributes kept")
	require.Equal(t, redeliver.ReasonExhausted, a[sqs.AttributeReason].StringValue)
	require.Equal(t, "4", a[sqs.AttributeDeliveries].StringValue)
	require.Equal(t, errJob.Error(), a[sqs.AttributeError].StringValue)
	require.Equal(t, id, a[sqs.AttributeMessageID].StringValue)
	require.Equal(t, "2026-01-01T00:00:00Z", a[sqs.AttributeFirstSeen].StringValue)
	require.Equal(t, sqs.Stats{Deliveries: 4, Retried: 3, DeadLettered: 1}, c.Stats())
}

func TestConsumer_APermanentErrorDeadLettersAtOnce(t *testing.T) {
	f, client := setup(t)
	c, err := sqs.New(client, jobPolicy(), func(context.Context, types.Message) error {
		return fault.Permanent(errors.New("malformed csv"))
	}, sqs.Options{QueueURL: jobs, DeadLetterURL: dlq})
	require.NoError(t, err)
	f.put(jobs, "import csv 4", nil)
	require.NoError(t, c.Process(context.Background(), receive(t, client)[0]))
	require.Empty(t, f.messages(jobs))
	require.Equal(t, redeliver.ReasonPermanent, f.messages(dlq)[0].attrs[sqs.AttributeReason].StringValue)
}

func TestConsumer_ADeadLetterThatFailsLosesNothing(t *testing.T) {
	f, client := setup(t)
	c, err := sqs.New(client, jobPolicy(), func(context.Context, types.Message) error {
		return fault.Permanent(errJob)
	}, sqs.Options{QueueURL: jobs, DeadLetterURL: dlq})
	require.NoError(t, err)
	f.put(jobs, "charge card 9", nil)
	f.failDLQ = 1
	err = c.Process(context.Background(), receive(t, client)[0])
	require.ErrorContains(t, err, "sending message m-1 to the dead-letter queue")
	require.Len(t, f.messages(jobs), 1, "not deleted: it will be received again")
	f.advance(31 * time.Second) // its visibility timeout ends
	require.NoError(t, c.Process(context.Background(), receive(t, client)[0]))
	require.Empty(t, f.messages(jobs))
	require.Len(t, f.messages(dlq), 1)
}

func TestConsumer_RunProcessesUntilCancelled(t *testing.T) {
	f, client := setup(t)
	done := make(chan struct{}, 3)
	c, err := sqs.New(client, jobPolicy(), func(context.Context, types.Message) error { return nil },
		sqs.Options{QueueURL: jobs, DeadLetterURL: dlq, WaitTime: time.Second,
			OnDecide: func(types.Message, int, redeliver.Decision) { done <- struct{}{} }})
	require.NoError(t, err)
	for i := range 3 {
		f.put(jobs, "job "+itoa(i), nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error)
	go func() { ran <- c.Run(ctx) }()
	for range 3 {
		<-done
	}
	cancel()
	require.ErrorIs(t, <-ran, context.Canceled)
	require.Empty(t, f.messages(jobs))
	require.Equal(t, uint64(3), c.Stats().Deleted)
}

func TestNew_RefusesBadInput(t *testing.T) {
	_, client := setup(t)
	p := jobPolicy()
	h := func(context.Context, types.Message) error { return nil }
	for _, tt := range []struct {
		api  sqs.API
		p    *redeliver.Schedule
		h    sqs.Handler
		o    sqs.Options
		want string
	}{
		{nil, p, h, sqs.Options{QueueURL: jobs, DeadLetterURL: dlq}, "API is nil"},
		{client, nil, h, sqs.Options{QueueURL: jobs, DeadLetterURL: dlq}, "Schedule is nil"},
		{client, p, nil, sqs.Options{QueueURL: jobs, DeadLetterURL: dlq}, "Handler is nil"},
		{client, p, h, sqs.Options{DeadLetterURL: dlq}, "QueueURL is empty"},
		{client, p, h, sqs.Options{QueueURL: jobs}, "DeadLetterURL is empty"},
		{client, p, h, sqs.Options{QueueURL: jobs, DeadLetterURL: dlq, WaitTime: time.Minute}, "WaitTime is 1m0s"},
		{client, p, h, sqs.Options{QueueURL: jobs, DeadLetterURL: dlq, MaxMessages: 11}, "MaxMessages is 11"},
	} {
		_, err := sqs.New(tt.api, tt.p, tt.h, tt.o)
		require.ErrorContains(t, err, tt.want)
	}
}
