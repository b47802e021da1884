package sqs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/redeliver"
	"github.com/backstop-go/backstop/redeliver/sqs"
)

// TestConsumer_ADeadLetterKeepsWithinSQSsTenAttributes: SQS refuses a message of more
// than 10 attributes. A dead letter keeps all of the message's own; Backstop's five go
// each in an attribute while they fit, together in Backstop-Dead-Letter when they do
// not, and are left out when the message has all 10 — it is dead-lettered either way.
func TestConsumer_ADeadLetterKeepsWithinSQSsTenAttributes(t *testing.T) {
	for _, own := range []int{0, 5, 6, 9, 10} {
		t.Run(fmt.Sprintf("%d attributes of its own", own), func(t *testing.T) {
			f, client := setup(t)
			c, err := sqs.New(client, jobPolicy(), func(context.Context, types.Message) error {
				return fault.Permanent(errJob)
			}, sqs.Options{QueueURL: jobs, DeadLetterURL: dlq})
			require.NoError(t, err)
			attrs := map[string]attrValue{}
			for i := range own {
				attrs[fmt.Sprintf("a%d", i)] = attrValue{DataType: "String", StringValue: fmt.Sprint(i)}
			}
			id := f.put(jobs, "sync crm 3", attrs)
			require.NoError(t, c.Process(context.Background(), receive(t, client)[0]))
			require.Empty(t, f.messages(jobs), "dead-lettered and deleted")
			dead := f.messages(dlq)
			require.Len(t, dead, 1)
			got := dead[0].attrs
			for k, v := range attrs {
				require.Equal(t, v.StringValue, got[k].StringValue, "its own %s kept", k)
			}
			require.LessOrEqual(t, len(got), sqs.MaxAttributes)
			switch {
			case own+5 <= sqs.MaxAttributes:
				require.Equal(t, redeliver.ReasonPermanent, got[sqs.AttributeReason].StringValue)
				require.Equal(t, id, got[sqs.AttributeMessageID].StringValue)
				require.NotContains(t, got, sqs.AttributeDeadLetter)
			case own < sqs.MaxAttributes:
				require.NotContains(t, got, sqs.AttributeReason)
				var all map[string]string
				require.NoError(t, json.Unmarshal([]byte(got[sqs.AttributeDeadLetter].StringValue), &all))
				require.Equal(t, map[string]string{"error": errJob.Error(), "reason": redeliver.ReasonPermanent, "deliveries": "1",
					"message_id": id, "first_receive": "2026-01-01T00:00:00Z"}, all)
			default:
				require.Len(t, got, sqs.MaxAttributes, "its own ten only")
			}
		})
	}
}

// TestConsumer_ALongErrorIsCutInTheDeadLetter: the error text a dead letter carries is
// cut at 4 KiB, on a character's boundary.
func TestConsumer_ALongErrorIsCutInTheDeadLetter(t *testing.T) {
	f, client := setup(t)
	long := strings.Repeat("é", 5000) // 10 000 bytes
	c, err := sqs.New(client, jobPolicy(), func(context.Context, types.Message) error {
		return fault.Permanent(errors.New(long))
	}, sqs.Options{QueueURL: jobs, DeadLetterURL: dlq})
	require.NoError(t, err)
	f.put(jobs, "x", nil)
	require.NoError(t, c.Process(context.Background(), receive(t, client)[0]))
	text := f.messages(dlq)[0].attrs[sqs.AttributeError].StringValue
	require.True(t, utf8.ValidString(text))
	require.True(t, strings.HasSuffix(text, "…"))
	require.LessOrEqual(t, len(text), 4096+len("…"))
	require.True(t, strings.HasPrefix(long, strings.TrimSuffix(text, "…")))
}

// TestConsumer_DeadLettersToAFIFOQueue: a FIFO queue takes a message only with a
// MessageGroupId; the dead letter carries one.
func TestConsumer_DeadLettersToAFIFOQueue(t *testing.T) {
	const fifo = "http://sqs.test/000000000000/jobs-dlq.fifo"
	f, client := setup(t)
	f.queues[fifo] = nil
	c, err := sqs.New(client, jobPolicy(), func(context.Context, types.Message) error {
		return fault.Permanent(errJob)
	}, sqs.Options{QueueURL: jobs, DeadLetterURL: fifo})
	require.NoError(t, err)
	f.put(jobs, "charge card 9", nil)
	require.NoError(t, c.Process(context.Background(), receive(t, client)[0]))
	require.Empty(t, f.messages(jobs))
	require.Len(t, f.messages(fifo), 1)
}
