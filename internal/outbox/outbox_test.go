package outbox_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/outbox"
)

// creator records the rows Enqueue hands to the store.
type creator struct {
	rows []*agentowl.OutboxMessage
	err  error
}

func (c *creator) MessageCreate(_ context.Context, m *agentowl.OutboxMessage) error {
	c.rows = append(c.rows, m)
	return c.err
}

func TestEnqueue(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 123456000, time.UTC)
	deadline := now.Add(168 * time.Hour)
	payload := &agentowl.PayloadRef{EventID: "evt_1", At: 10, Len: 4}
	tests := []struct {
		name string
		in   outbox.Message
		want agentowl.OutboxMessage
	}{
		{"approval notification",
			outbox.Message{ID: "m1", TenantID: "t1", Kind: "aap.request_resolved", Destination: "instance:i1", Subject: "req_1",
				Body: []byte(`{"id":"m1"}`), Deadline: deadline},
			agentowl.OutboxMessage{ID: "m1", TenantID: "t1", Kind: "aap.request_resolved", Destination: "instance:i1", Subject: "req_1",
				Body: []byte(`{"id":"m1"}`), CreatedAt: now, DeadlineAt: deadline, State: agentowl.MessagePending, NextAttempt: now}},
		{"handoff with its event's payload",
			outbox.Message{ID: "m2", TenantID: "t1", Kind: "work.handoff", Destination: "endpoint:e1", Subject: "work_1",
				Body: []byte(`{"event":{"payload":"text"}}`), Deadline: now.Add(time.Hour), Payload: payload},
			agentowl.OutboxMessage{ID: "m2", TenantID: "t1", Kind: "work.handoff", Destination: "endpoint:e1", Subject: "work_1",
				Body: []byte(`{"event":{"payload":"text"}}`), CreatedAt: now, DeadlineAt: now.Add(time.Hour),
				State: agentowl.MessagePending, NextAttempt: now, Payload: payload}},
		{"nothing but the defaults",
			outbox.Message{},
			agentowl.OutboxMessage{CreatedAt: now, State: agentowl.MessagePending, NextAttempt: now}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &creator{}
			got, err := outbox.Enqueue(context.Background(), c, now, tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.rows) != 1 || c.rows[0] != got {
				t.Fatalf("Enqueue wrote %d rows and returned %p, want the one row written (%v)", len(c.rows), got, c.rows)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("row\n got %+v\nwant %+v", *got, tt.want)
			}
		})
	}

	t.Run("store error", func(t *testing.T) {
		boom := errors.New("boom")
		got, err := outbox.Enqueue(context.Background(), &creator{err: boom}, now, outbox.Message{ID: "m3"})
		if !errors.Is(err, boom) || got != nil {
			t.Errorf("Enqueue = %v, %v; want nil and the store's error", got, err)
		}
	})
}
