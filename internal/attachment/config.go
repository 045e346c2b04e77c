package attachment

import (
	"fmt"
	"time"
)

// Profiles of defaults (docs/attachments.md).
const (
	// ProfileSelfHosted: 20 parts per message, 10 MiB per file, 25 MiB
	// decoded per message, 7 days of retention; the complete message is
	// bounded by the channel's own limit.
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
	// MaxParts caps the MIME parts of one message (body and attachment
	// parts alike); a message with more is refused (too_many_parts).
	// Defaults to 20.
	MaxParts int
	// MaxFileBytes caps one attachment's decoded size; a larger one is
	// recorded blocked (file_too_large) and the message kept. Defaults to
	// 10 MiB.
	MaxFileBytes int64
	// MaxDecodedBytes caps the decoded bytes of all parts of one message; a
	// message with more is refused (decoded_too_large). Defaults to 25 MiB.
	MaxDecodedBytes int64
	// MaxMessageBytes caps the complete message as received, MIME encoding
	// included; channels refuse larger ones with their size answer.
	// Defaults to 1,000,000 in the hosted profile and to 0 self-hosted (the
	// channel's own limit, which may be lower).
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

// Reasons a part is recorded blocked (store.Attachment.Blocked).
const (
	BlockedFileTooLarge = "file_too_large"
	BlockedQuota        = "quota"
)

// MiB is 2^20 bytes.
const MiB = 1 << 20

func (c Config) withDefaults() Config {
	if c.Profile == "" {
		c.Profile = ProfileSelfHosted
	}
	hosted := c.Profile == ProfileHosted
	if c.MaxParts <= 0 {
		c.MaxParts = 20
	}
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
