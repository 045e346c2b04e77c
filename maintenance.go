package agentowl

import "time"

// Lease is a named lease held by one process until Until.
type Lease struct {
	Name       string
	Owner      string
	AcquiredAt time.Time
	Until      time.Time
}

// JobRun is the record of a maintenance job's latest run, and its totals.
type JobRun struct {
	Name      string
	Owner     string // the process that ran it
	StartedAt time.Time
	Duration  time.Duration
	// Outcome is ok, error or skipped (the job had nothing to run with,
	// such as no attachment storage).
	Outcome  string
	Error    string
	Affected int64 // rows or items the run changed
	Runs     int64
	Failures int64
	// LastOKAt is when the latest run that ended ok started.
	LastOKAt *time.Time
}
