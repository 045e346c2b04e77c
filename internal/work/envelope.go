package work

import (
	"bytes"
	"encoding/json"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/agentwork"
)

// The handoff envelope is written by the store's single writer (SQLite
// commits one batch at a time), so every microsecond spent building it
// inside the transaction is taken from every other write. Its costly part
// is the event's payload (up to the email limit) and headers, which are
// known before the transaction; what the transaction decides (the
// conversation, the work, the credential) is small. EncodeEvent encodes the
// costly part once, outside; handoffBody assembles the envelope around it.
// The bytes are exactly json.Marshal(agentwork.Handoff{…}): each value is
// encoded by encoding/json itself, in the struct's field order; a field
// added to agentwork.Handoff or agentwork.Event must be added here too, and
// FuzzHandoffBody (its seeds run with every go test) fails until it is.

// EncodedEvent is the JSON of an event's headers and payload as its handoff
// envelope carries them, encoded before the transaction that hands it off.
type EncodedEvent struct {
	// fields is `"headers":…,"payload":…`.
	fields []byte
	// payloadAt is where the payload begins in fields (it runs to the
	// end), and stored tells that those bytes are the event's payload
	// exactly as it is stored, so that the handoff's message can refer to
	// it (agentowl.PayloadRef) rather than hold a second copy.
	payloadAt int
	stored    bool
}

// EncodeEvent encodes ev's headers and payload for its handoff envelope
// (HandoffEncodedTx). Call it outside the store's write, where it costs no
// other write anything. An invalid payload is an error. marshaled reports
// that ev.Payload is json.Marshal's output (a channel adapter encoded it):
// encoding/json would leave it unchanged, so it is carried as is rather
// than compacted again, which costs several times its encoding. A body
// received from a sender is never marshaled.
func EncodeEvent(ev *agentowl.Event, marshaled bool) (*EncodedEvent, error) {
	headers := ev.Headers
	if headers == nil {
		headers = map[string][]string{}
	}
	h, err := json.Marshal(headers)
	if err != nil {
		return nil, err
	}
	p := []byte(ev.Payload)
	if !marshaled || len(p) == 0 {
		if p, err = json.Marshal(ev.Payload); err != nil {
			return nil, err
		}
	}
	b := make([]byte, 0, len(h)+len(p)+24)
	b = append(b, `"headers":`...)
	b = append(b, h...)
	b = append(b, `,"payload":`...)
	at := len(b)
	b = append(b, p...)
	return &EncodedEvent{fields: b, payloadAt: at, stored: len(p) >= referAtLeast && bytes.Equal(p, ev.Payload)}, nil
}

// referAtLeast is the smallest payload a handoff's message refers to
// rather than copies: below a database page, the second copy costs less
// than the reference (an index entry, and the payload read back on every
// claim).
const referAtLeast = 4096

// handoffBody returns json.Marshal(d) for d whose event's headers and
// payload enc encodes, and where in it the event's stored payload lies
// (nil when enc's payload is not the stored bytes).
func handoffBody(d *agentwork.Handoff, enc *EncodedEvent) ([]byte, *agentowl.PayloadRef, error) {
	ev := &d.Event
	attachments, err := json.Marshal(ev.Attachments)
	if err != nil {
		return nil, nil, err
	}
	var block []byte
	if d.Work != nil {
		if block, err = json.Marshal(d.Work); err != nil {
			return nil, nil, err
		}
	}
	b := make([]byte, 0, len(enc.fields)+len(attachments)+len(block)+512)
	str := func(name, v string) {
		j, _ := json.Marshal(v) // a string always encodes
		b = append(append(b, name...), j...)
	}
	str(`{"id":`, d.ID)
	str(`,"type":`, d.Type)
	str(`,"created_at":`, d.CreatedAt)
	str(`,"event":{"id":`, ev.ID)
	str(`,"channel":`, ev.Channel)
	str(`,"binding_id":`, ev.BindingID)
	str(`,"conversation_id":`, ev.ConversationID)
	b = append(b, `,"follow_up":`...)
	if ev.FollowUp {
		b = append(b, "true"...)
	} else {
		b = append(b, "false"...)
	}
	str(`,"sender":`, ev.Sender)
	str(`,"received_at":`, ev.ReceivedAt)
	b = append(b, ',')
	var ref *agentowl.PayloadRef
	if enc.stored {
		ref = &agentowl.PayloadRef{EventID: ev.ID, At: len(b) + enc.payloadAt, Len: len(enc.fields) - enc.payloadAt}
	}
	b = append(b, enc.fields...)
	b = append(b, `,"attachments":`...)
	b = append(b, attachments...)
	b = append(b, '}')
	if block != nil {
		b = append(b, `,"work":`...)
		b = append(b, block...)
	}
	return append(b, '}'), ref, nil
}
