package agentowl

import "time"

// Notification is one notice to one recipient about one cause.
type Notification struct {
	ID         string // ntf_…
	TenantID   string
	OperatorID string
	// CauseKey names the state change it reports, such as
	// "work.completed:work_…"; unique per recipient.
	CauseKey string
	// Kind is result, failure or input (what preferences mute by).
	Kind string
	// Cause is the state change: work_completed, incident, needs_input or
	// approval_pending.
	Cause string
	// Subject is what the deep link opens: "work:<id>" or "attention:<id>".
	Subject string
	// EndpointID is the endpoint the cause belongs to ("" for none).
	EndpointID string
	Title      string
	CreatedAt  time.Time
	ReadAt     *time.Time
}

// NotificationMute is one muted kind or endpoint of a recipient.
type NotificationMute struct {
	By    string // kind or endpoint
	Value string
}
