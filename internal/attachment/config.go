package attachment

import (
	"fmt"
	"time"
)

// Profiles of defaults (docs/attachments.md).
const (
	// ProfileSelfHosted: 10 MiB per file, 25 MiB decoded per message, 7
	// days of retention; the complete message and its parts are bounded by
	// the email channels' limits (20 parts, 25 MiB by default).
	ProfileSelfHosted = "self-hosted"
	// ProfileHosted: the complete message, MIME encoding included, at most
	// 1 MB (1,000,000 bytes); 30 days of retention.
	ProfileHosted = "hosted"
)

// Config holds the ceilings, retention and quota of retained attachments.
// A field left zero takes its profile's default; a field set wins over it.
type Config struct {
	// Profile picks the defaults: ProfileSelfHosted (the default) or
	// ProfileHosted.
	Profile string
	// MaxFileBytes caps one attachment's decoded size; a larger one is
	// recorded blocked (file_too_large) and the message kept. Defaults to
	// 10 MiB; the server sets it to the email channels' part limit.
	MaxFileBytes int64
	// MaxDecodedBytes caps the decoded bytes of one message's attachments;
	// a message with more is refused (request_too_large). Defaults to 25
	// MiB.
	MaxDecodedBytes int64
	// MaxMessageBytes caps the complete message as received, MIME encoding
	// included: the server lowers the email channels' message limit to it.
	// Defaults to 1,000,000 in the hosted profile and to 0 self-hosted (the
	// channels' own limit).
	MaxMessageBytes int64
	// Retention is how long a file is kept from its receipt; each file's
	// expiry is fixed when it is recorded. Defaults to 7 days (30 hosted).
	Retention time.Duration
	// TenantRetainedBytes caps the bytes one tenant retains; a part that
	// would pass it is recorded blocked (quota). Defaults to 5 GiB.
	TenantRetainedBytes int64
	// OrphanGrace is how long a message may take from its first stored
	// byte to its event's commit; bytes of an upload older than this that
	// never committed are deleted. Defaults to 1h.
	OrphanGrace time.Duration
}

// Reasons a part is recorded blocked (agentowl.Attachment.Blocked).
const (
	BlockedFileTooLarge = "file_too_large"
	BlockedQuota        = "quota"
)

// MiB is 2^20 bytes.
const MiB = 1 << 20

// MaxDecodedCeiling is the seed's ceiling of MaxDecodedBytes: lower is
// allowed, higher refused (Validate).
const MaxDecodedCeiling = 25 * MiB

// Validate refuses limits over the seed's ceilings.
func (c Config) Validate() error {
	if c.MaxDecodedBytes > MaxDecodedCeiling {
		return fmt.Errorf("attachments: decoded bytes per message %d is over the ceiling of %d", c.MaxDecodedBytes, MaxDecodedCeiling)
	}
	return nil
}

// WithDefaults is c with every zero field at its profile's default.
func (c Config) WithDefaults() Config {
	if c.Profile == "" {
		c.Profile = ProfileSelfHosted
	}
	hosted := c.Profile == ProfileHosted
	if c.MaxFileBytes <= 0 {
		c.MaxFileBytes = 10 * MiB
	}
	if c.MaxDecodedBytes <= 0 {
		c.MaxDecodedBytes = 25 * MiB
	}
	if c.MaxMessageBytes <= 0 && hosted {
		c.MaxMessageBytes = 1_000_000
	}
	if c.Retention <= 0 {
		c.Retention = 7 * 24 * time.Hour
		if hosted {
			c.Retention = 30 * 24 * time.Hour
		}
	}
	if c.TenantRetainedBytes <= 0 {
		c.TenantRetainedBytes = 5 << 30
	}
	if c.OrphanGrace <= 0 {
		c.OrphanGrace = time.Hour
	}
	return c
}

func (c Config) validate() error {
	if c.Profile != ProfileSelfHosted && c.Profile != ProfileHosted {
		return fmt.Errorf("attachment profile %q must be %s or %s", c.Profile, ProfileSelfHosted, ProfileHosted)
	}
	return nil
}

// ParseProfile checks a profile name (AGENTOWL_ATTACHMENT_PROFILE).
func ParseProfile(v string) (string, error) {
	if v != ProfileSelfHosted && v != ProfileHosted {
		return "", fmt.Errorf("%q is not %s or %s", v, ProfileSelfHosted, ProfileHosted)
	}
	return v, nil
}
