package sqs_test

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/backstop-go/backstop/policy/policytest"
)

// fakeSQS serves the part of SQS's JSON protocol (AWS JSON 1.0: POST /, the operation
// in X-Amz-Target) the Consumer uses, for the tests: queues in memory, receive counts,
// visibility timeouts on a clock the test moves, and SQS's limit on them: a message is
// hidden at most 12 hours from its latest receive, and a ChangeMessageVisibility that
// would hide it longer is refused with InvalidParameterValue. It is not SQS: ReceiveMessage waits
// for a message only until the request ends, and message attributes carry no MD5 (the
// tests' client skips checksum validation).
type fakeSQS struct {
	mu      sync.Mutex
	clock   *policytest.Clock // the time; the tests' Consumers read it too
	queues  map[string][]*fakeMsg
	next    int
	failDLQ int              // SendMessage calls to refuse
	delays  map[string][]int // visibility timeouts set, by message id
	arrived chan struct{}    // a message was sent
}

type fakeMsg struct {
	id, body, receipt string
	attrs             map[string]attrValue
	receives          int
	first             time.Time
	received          time.Time // the latest receive
	visibleAt         time.Time
}

type attrValue struct {
	DataType    string `json:"DataType"`
	StringValue string `json:"StringValue,omitempty"`
}

func newFakeSQS(queues ...string) *fakeSQS {
	f := &fakeSQS{clock: policytest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), queues: map[string][]*fakeMsg{},
		delays: map[string][]int{}, arrived: make(chan struct{}, 100)}
	for _, q := range queues {
		f.queues[q] = nil
	}
	return f
}

// advance moves the fake's clock.
func (f *fakeSQS) advance(d time.Duration) { f.clock.Advance(d) }

// maxVisibility is SQS's limit: 12 hours from the receive.
const maxVisibility = 43200 * time.Second

// put adds a message to queue q and returns its id.
func (f *fakeSQS) put(q, body string, attrs map[string]attrValue) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	m := &fakeMsg{id: fmt.Sprintf("m-%d", f.next), body: body, attrs: attrs, visibleAt: f.clock.Now()}
	f.queues[q] = append(f.queues[q], m)
	select {
	case f.arrived <- struct{}{}:
	default:
	}
	return m.id
}

// messages returns the bodies and attributes left in queue q.
func (f *fakeSQS) messages(q string) []*fakeMsg {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*fakeMsg(nil), f.queues[q]...)
}

func (f *fakeSQS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")
	var in struct {
		QueueUrl            string
		MaxNumberOfMessages int
		ReceiptHandle       string
		VisibilityTimeout   int
		MessageBody         string
		MessageAttributes   map[string]attrValue
		MessageGroupId      string
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		fail(w, "InvalidParameterValue", err.Error())
		return
	}
	f.mu.Lock()
	now := f.clock.Now()
	q, ok := f.queues[in.QueueUrl]
	if !ok {
		f.mu.Unlock()
		fail(w, "QueueDoesNotExist", in.QueueUrl)
		return
	}
	switch op {
	case "ReceiveMessage":
		var out []map[string]any
		for _, m := range q {
			if len(out) == max(in.MaxNumberOfMessages, 1) || m.visibleAt.After(now) {
				continue
			}
			m.receives++
			if m.receives == 1 {
				m.first = now
			}
			m.received = now
			m.visibleAt = now.Add(30 * time.Second) // the queue's visibility timeout
			m.receipt = fmt.Sprintf("%s/%d", m.id, m.receives)
			sum := md5.Sum([]byte(m.body))
			out = append(out, map[string]any{"MessageId": m.id, "ReceiptHandle": m.receipt, "Body": m.body,
				"MD5OfBody": hex.EncodeToString(sum[:]), "MessageAttributes": m.attrs,
				"Attributes": map[string]string{"ApproximateReceiveCount": fmt.Sprint(m.receives),
					"ApproximateFirstReceiveTimestamp": fmt.Sprint(m.first.UnixMilli())}})
		}
		f.mu.Unlock()
		if len(out) == 0 { // a long poll: wait until the client gives up
			<-r.Context().Done()
		}
		reply(w, map[string]any{"Messages": out})
	case "ChangeMessageVisibility", "DeleteMessage":
		for i, m := range q {
			if m.receipt != in.ReceiptHandle || in.ReceiptHandle == "" {
				continue
			}
			timeout := time.Duration(in.VisibilityTimeout) * time.Second
			if op == "ChangeMessageVisibility" && (timeout < 0 || now.Sub(m.received)+timeout > maxVisibility) {
				f.mu.Unlock()
				fail(w, "InvalidParameterValue", fmt.Sprintf("Value %d for parameter VisibilityTimeout is invalid. "+
					"Reason: Total VisibilityTimeout for the message is beyond the limit [43200 seconds]", in.VisibilityTimeout))
				return
			}
			if op == "DeleteMessage" {
				f.queues[in.QueueUrl] = append(q[:i:i], q[i+1:]...)
			} else {
				m.visibleAt = now.Add(timeout)
				f.delays[m.id] = append(f.delays[m.id], in.VisibilityTimeout)
			}
			f.mu.Unlock()
			reply(w, map[string]any{})
			return
		}
		f.mu.Unlock()
		fail(w, "ReceiptHandleIsInvalid", in.ReceiptHandle)
	case "SendMessage":
		switch {
		case len(in.MessageAttributes) > 10:
			f.mu.Unlock()
			fail(w, "InvalidParameterValue", fmt.Sprintf("Number of message attributes [%d] exceeds the allowed maximum [10].", len(in.MessageAttributes)))
			return
		case strings.HasSuffix(in.QueueUrl, ".fifo") && in.MessageGroupId == "":
			f.mu.Unlock()
			fail(w, "MissingParameter", "The request must contain the parameter MessageGroupId.")
			return
		}
		if f.failDLQ > 0 {
			f.failDLQ--
			f.mu.Unlock()
			fail(w, "InternalError", "try again")
			return
		}
		f.mu.Unlock()
		id := f.put(in.QueueUrl, in.MessageBody, in.MessageAttributes)
		sum := md5.Sum([]byte(in.MessageBody))
		reply(w, map[string]any{"MessageId": id, "MD5OfMessageBody": hex.EncodeToString(sum[:])})
	default:
		f.mu.Unlock()
		fail(w, "InvalidAction", op)
	}
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, code, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	status := http.StatusBadRequest
	if code == "InternalError" {
		status = http.StatusInternalServerError
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.sqs#" + code, "message": msg})
}
