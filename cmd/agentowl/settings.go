package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/attachment"
	"github.com/agentowl/agentowl/internal/delivery"
	"github.com/agentowl/agentowl/internal/egress"
	"github.com/agentowl/agentowl/internal/ingress"
	"github.com/agentowl/agentowl/internal/maintenance"
	"github.com/agentowl/agentowl/internal/ratelimit"
	"github.com/agentowl/agentowl/internal/server"
)

// setting is one server setting: its flag (none for most), its environment
// variable, its default and bound as documented, and how its value fills
// server.Config. The table below is the only place cmd turns flags and the
// environment into configuration; `serve --help` and docs/settings.md are
// printed from it.
type setting struct {
	flag    string // without "--"; "" when the setting has no flag
	env     string
	def     string // the default, as shown; the component applies it
	bound   string // the accepted values, as shown
	help    string
	section string
	set     func(c *server.Config, v string) error
}

// settings lists every `agentowl serve` setting. A flag wins over its
// variable; an unset setting keeps the component's default.
var settings = []setting{
	{section: "Server", flag: "data-dir", env: "AGENTOWL_DATA_DIR", def: "./agentowl-data", bound: "a directory",
		help: "SQLite database, generated secret key and bootstrap operator token", set: text(func(c *server.Config) *string { return &c.DataDir })},
	{section: "Server", flag: "listen", env: "AGENTOWL_LISTEN", def: "127.0.0.1:8470", bound: "host:port",
		help: "HTTP listen address", set: text(func(c *server.Config) *string { return &c.Listen })},
	{section: "Server", flag: "database-url", env: "AGENTOWL_DATABASE_URL", def: "empty (SQLite)", bound: "postgres://… or postgresql://…",
		help: "PostgreSQL instead of SQLite; replicas share it", set: databaseURL},
	{section: "Server", flag: "public-url", env: "AGENTOWL_PUBLIC_URL", def: "http://LISTEN-ADDRESS", bound: "a URL",
		help: "externally reachable base URL of callback and ingress URLs", set: text(func(c *server.Config) *string { return &c.PublicURL })},
	{section: "Server", env: "AGENTOWL_SECRET_KEY", def: "DATA-DIR/secret-key, created on first start", bound: "base64 of 32 bytes",
		help: "key that seals stored secrets; every replica needs the same", set: parsed(parseKey, func(c *server.Config) *[]byte { return &c.SecretKey })},
	{section: "Server", env: "AGENTOWL_SECRET_KEY_PREVIOUS", def: "DATA-DIR/secret-key.previous if present, else none", bound: "base64 of 32 bytes",
		help: "during a key rotation, the old key: it only opens what it sealed until `agentowl secrets rotate-key` reports it can be removed (docs/operating.md, \"The secret key\")",
		set:  parsed(parseKey, func(c *server.Config) *[]byte { return &c.PreviousSecretKey })},

	{section: "Delivery and egress", env: "AGENTOWL_EGRESS_ALLOW_CIDRS", def: "empty", bound: "comma-separated CIDRs",
		help: "addresses exempt from the SSRF address check (internal receivers)", set: parsed(egress.ParseAllowCIDRs, func(c *server.Config) *[]netip.Prefix { return &c.Egress.AllowCIDRs })},
	{section: "Delivery and egress", env: "AGENTOWL_EGRESS_CA_FILE", def: "none", bound: "a PEM file",
		help: "extra roots trusted for receivers' TLS", set: parsed(os.ReadFile, func(c *server.Config) *[]byte { return &c.Egress.ExtraRootsPEM })},
	{section: "Delivery and egress", env: "AGENTOWL_DELIVERY", def: "on", bound: "on or off",
		help: "off runs no delivery engine in this process (an API-only replica): messages wait for a replica that delivers", set: offSwitch(func(c *server.Config) *bool { return &c.NoDelivery })},
	{section: "Delivery and egress", env: "AGENTOWL_RETRY_MIN_DELAY", def: "5s", bound: "a positive duration",
		help: "first retry delay bound", set: duration(func(c *server.Config) *time.Duration { return &c.Delivery.RetryMinDelay })},
	{section: "Delivery and egress", env: "AGENTOWL_RETRY_MAX_DELAY", def: "1h", bound: "a positive duration",
		help: "retry delay cap", set: duration(func(c *server.Config) *time.Duration { return &c.Delivery.RetryMaxDelay })},

	{section: "Limits", env: "AGENTOWL_CREATE_RATE", def: "100000", bound: "≥ 1 per minute",
		help: "approval requests created per minute per tenant", set: perMinute(func(c *server.Config) *ratelimit.Limit { return &c.Approval.CreateLimit })},
	{section: "Limits", env: "AGENTOWL_REGISTER_RATE", def: "30", bound: "≥ 1 per minute",
		help: "receiver verifications per minute per tenant", set: perMinute(func(c *server.Config) *ratelimit.Limit { return &c.Approval.RegisterLimit })},
	{section: "Limits", env: "AGENTOWL_REGISTER_DESTINATION_RATE", def: "30", bound: "≥ 1 per minute",
		help: "receiver verifications per minute per destination", set: perMinute(func(c *server.Config) *ratelimit.Limit { return &c.RegisterPerDestination })},
	{section: "Limits", env: "AGENTOWL_DELIVERY_TENANT_RATE", def: "600000", bound: "≥ 1 per minute",
		help: "delivery attempts per minute per tenant", set: perMinute(func(c *server.Config) *ratelimit.Limit { return &c.Delivery.PerTenantRate })},
	{section: "Limits", env: "AGENTOWL_DELIVERY_DESTINATION_RATE", def: "360000", bound: "≥ 1 per minute",
		help: "delivery attempts per minute per destination", set: perMinute(func(c *server.Config) *ratelimit.Limit { return &c.Delivery.PerHostRate })},
	{section: "Limits", env: "AGENTOWL_DELIVERY_DESTINATION_CONCURRENCY", def: "32", bound: fmt.Sprintf("1–%d", delivery.MaxPerHostConcurrency),
		help: "delivery attempts in flight per destination, all replicas together",
		set:  count(func(c *server.Config) *int { return &c.Delivery.PerHostConcurrency }, delivery.MaxPerHostConcurrency)},
	{section: "Limits", env: "AGENTOWL_DELIVERY_ACCOUNT_CONCURRENCY", def: "64", bound: fmt.Sprintf("1–%d", delivery.MaxPerHostConcurrency),
		help: "delivery attempts in flight per tenant (provisioning account), all replicas together",
		set:  count(func(c *server.Config) *int { return &c.Delivery.PerAccountConcurrency }, delivery.MaxPerHostConcurrency)},
	{section: "Limits", env: "AGENTOWL_DELIVERY_CONCURRENCY", def: "256", bound: "≥ 1",
		help: "delivery attempts in flight per process", set: count(func(c *server.Config) *int { return &c.Delivery.Concurrency }, 0)},
	{section: "Limits", env: "AGENTOWL_CALLBACK_RATE", def: "60", bound: "≥ 1 per minute",
		help: "runtime callbacks per minute per endpoint", set: perMinute(func(c *server.Config) *ratelimit.Limit { return &c.Work.CallbackLimit })},
	{section: "Limits", env: "AGENTOWL_MAX_CALLBACKS_PER_WORK", def: "10000", bound: "≥ 1",
		help: "callbacks recorded per work", set: count(func(c *server.Config) *int { return &c.Work.MaxCallbacksPerWork }, 0)},
	{section: "Limits", env: "AGENTOWL_INGRESS_RATE", def: "6000", bound: "≥ 1 per minute",
		help: "inbound events per minute per binding", set: perMinute(func(c *server.Config) *ratelimit.Limit { return &c.Ingress.Limit })},

	{section: "HTTP", env: "AGENTOWL_HTTP_READ_HEADER_TIMEOUT", def: "10s", bound: "a positive duration",
		help: "time to read a request's headers", set: duration(func(c *server.Config) *time.Duration { return &c.HTTP.ReadHeaderTimeout })},
	{section: "HTTP", env: "AGENTOWL_HTTP_READ_TIMEOUT", def: "30s", bound: "a positive duration",
		help: "time to read a request's body", set: duration(func(c *server.Config) *time.Duration { return &c.HTTP.ReadTimeout })},
	{section: "HTTP", env: "AGENTOWL_HTTP_WRITE_TIMEOUT", def: "60s", bound: "a positive duration",
		help: "time to answer (a long poll gets its wait on top)", set: duration(func(c *server.Config) *time.Duration { return &c.HTTP.WriteTimeout })},
	{section: "HTTP", env: "AGENTOWL_HTTP_IDLE_TIMEOUT", def: "2m", bound: "a positive duration",
		help: "time a kept-alive connection may idle", set: duration(func(c *server.Config) *time.Duration { return &c.HTTP.IdleTimeout })},
	{section: "HTTP", env: "AGENTOWL_MAX_CONNECTIONS", def: "1024", bound: "≥ 1",
		help: "HTTP connections served at once", set: count(func(c *server.Config) *int { return &c.HTTP.MaxConnections }, 0)},
	{section: "HTTP", env: "AGENTOWL_ADMISSION_MAX_WAIT", def: "250ms", bound: "a positive duration",
		help: "longest a write (request created, decision, callback, inbound event) waits for its turn, shared with the delivery engine's backlog (and with its own write when it must wait); one that would wait longer is refused with 503 overloaded and Retry-After",
		set:  duration(func(c *server.Config) *time.Duration { return &c.HTTP.Admission.MaxWait })},
	{section: "HTTP", env: "AGENTOWL_ADMISSION_CONCURRENCY", def: "64 (16 on PostgreSQL)", bound: "≥ 1",
		help: "writes of each of those surfaces that run at once per process; the others wait in line (on PostgreSQL as many as the store's connections, so that a surface's admitted writes do not queue unseen for one)",
		set:  count(func(c *server.Config) *int { return &c.HTTP.Admission.Concurrency }, 0)},

	{section: "Channels", env: "AGENTOWL_SMTP_DOMAIN", def: "none", bound: "a host name",
		help: "mail domain of generated smtp binding addresses (its MX points at the SMTP listener)",
		set:  text(func(c *server.Config) *string { return &c.Ingress.SMTPDomain })},
	{section: "Channels", flag: "smtp-listen", env: "AGENTOWL_SMTP_LISTEN", def: "empty (no SMTP listener)", bound: "host:port",
		help: "inbound SMTP listen address (the MX of smtp bindings' domains)", set: text(func(c *server.Config) *string { return &c.SMTP.Listen })},
	{section: "Channels", env: "AGENTOWL_SMTP_HOSTNAME", def: "localhost", bound: "a host name",
		help: "name the SMTP listener greets with", set: text(func(c *server.Config) *string { return &c.SMTP.Hostname })},
	{section: "Channels", env: "AGENTOWL_SMTP_TLS_CERT_FILE", def: "none (no STARTTLS)", bound: "a PEM file",
		help: "certificate chain offered with STARTTLS (with AGENTOWL_SMTP_TLS_KEY_FILE)", set: text(func(c *server.Config) *string { return &c.SMTP.CertFile })},
	{section: "Channels", env: "AGENTOWL_SMTP_TLS_KEY_FILE", def: "none", bound: "a PEM file",
		help: "private key of the STARTTLS certificate", set: text(func(c *server.Config) *string { return &c.SMTP.KeyFile })},
	{section: "Channels", env: "AGENTOWL_SMTP_MAX_RECIPIENTS", def: "50", bound: "≥ 1",
		help: "recipients accepted per message (more: 452 4.5.3)", set: count(func(c *server.Config) *int { return &c.SMTP.MaxRecipients }, 0)},
	{section: "Channels", env: "AGENTOWL_SMTP_MAX_LINE_LENGTH", def: "2000", bound: "≥ 1 bytes",
		help: "longest SMTP command or message line", set: count(func(c *server.Config) *int { return &c.SMTP.MaxLineLength }, 0)},
	{section: "Channels", env: "AGENTOWL_SMTP_COMMAND_TIMEOUT", def: "5m", bound: "a positive duration",
		help: "time an SMTP client has for its next command or data", set: duration(func(c *server.Config) *time.Duration { return &c.SMTP.CommandTimeout })},
	{section: "Channels", env: "AGENTOWL_SMTP_SESSION_TIMEOUT", def: "10m", bound: "a positive duration",
		help: "longest SMTP connection; the server then closes it", set: duration(func(c *server.Config) *time.Duration { return &c.SMTP.SessionTimeout })},
	{section: "Channels", env: "AGENTOWL_SMTP_MAX_CONNECTIONS", def: "500", bound: "≥ 1",
		help: "concurrent SMTP connections; one more is answered 421 4.7.0 (try later) and closed",
		set:  count(func(c *server.Config) *int { return &c.SMTP.MaxConnections }, 0)},
	{section: "Channels", env: "AGENTOWL_SMTP_MAX_CLIENT_CONNECTIONS", def: "a tenth of AGENTOWL_SMTP_MAX_CONNECTIONS (50)", bound: "≥ 1",
		help: "concurrent SMTP connections from one client address; one more from it is answered 421 4.7.0 and closed",
		set:  count(func(c *server.Config) *int { return &c.SMTP.MaxClientConnections }, 0)},
	{section: "Channels", env: "AGENTOWL_SMTP_CLIENT_CONNECTION_RATE", def: "600", bound: "≥ 1",
		help: "new SMTP connections per minute from one client address; past it, 421 4.7.0 until the next minute",
		set:  count(func(c *server.Config) *int { return &c.SMTP.ClientConnectionRate }, 0)},
	{section: "Channels", env: "AGENTOWL_EMAIL_MAX_MESSAGE_BYTES", def: "26214400 (25 MiB); hosted profile: 1000000", bound: fmt.Sprintf("1–%d", ingress.MaxMailBytes),
		help: "largest email as received, MIME encoding included (smtp: 552 5.3.4; cloudflare-email: 413)",
		set:  byteCount(func(c *server.Config) *int64 { return &c.Ingress.Mail.MaxMessageBytes }, ingress.MaxMailBytes)},
	{section: "Channels", env: "AGENTOWL_EMAIL_MAX_PARTS", def: "20", bound: fmt.Sprintf("1–%d", ingress.MaxMailParts),
		help: "MIME leaf parts per email, body text included", set: count(func(c *server.Config) *int { return &c.Ingress.Mail.MaxParts }, ingress.MaxMailParts)},
	{section: "Channels", env: "AGENTOWL_EMAIL_MAX_PART_BYTES", def: "10485760 (10 MiB)", bound: fmt.Sprintf("1–%d", ingress.MaxMailPartBytes),
		help: "decoded bytes per MIME part: a larger attachment is recorded blocked (file_too_large), a larger body text refuses the email",
		set:  byteCount(func(c *server.Config) *int64 { return &c.Ingress.Mail.MaxPartBytes }, ingress.MaxMailPartBytes)},

	{section: "Attachments", env: "AGENTOWL_BLOB_URL", def: "DATA-DIR/attachments", bound: "file:///dir or s3://bucket?endpoint=…&region=…",
		help: "private object storage of retained attachment bytes (S3 credentials from the AWS environment)",
		set:  text(func(c *server.Config) *string { return &c.BlobURL })},
	{section: "Attachments", env: "AGENTOWL_ATTACHMENT_PROFILE", def: "self-hosted", bound: "self-hosted or hosted",
		help: "hosted: the whole email (MIME encoding included) at most 1 MB, 30 days of retention", set: parsed(attachment.ParseProfile, func(c *server.Config) *string { return &c.Attachments.Profile })},
	{section: "Attachments", env: "AGENTOWL_ATTACHMENT_RETENTION", def: "168h (hosted: 720h)", bound: "a positive duration",
		help: "how long a new file is kept; a recorded file keeps its expiry",
		set:  duration(func(c *server.Config) *time.Duration { return &c.Attachments.Retention })},
	{section: "Attachments", env: "AGENTOWL_ATTACHMENT_MAX_DECODED_BYTES", def: "26214400 (25 MiB)", bound: fmt.Sprintf("1–%d", attachment.MaxDecodedCeiling),
		help: "decoded bytes per message; more refuses the message",
		set:  byteCount(func(c *server.Config) *int64 { return &c.Attachments.MaxDecodedBytes }, attachment.MaxDecodedCeiling)},
	{section: "Attachments", env: "AGENTOWL_TENANT_RETAINED_BYTES", def: "5368709120 (5 GiB)", bound: "≥ 1",
		help: "retained bytes per tenant; a file past it is recorded blocked (quota)",
		set:  byteCount(func(c *server.Config) *int64 { return &c.Attachments.TenantRetainedBytes }, 0)},
	{section: "Attachments", env: "AGENTOWL_ATTACHMENT_ORPHAN_GRACE", def: "1h", bound: "a positive duration",
		help: "time from a message's first stored byte to its commit; bytes of older uncommitted messages are deleted",
		set:  duration(func(c *server.Config) *time.Duration { return &c.Attachments.OrphanGrace })},
	{section: "Maintenance", env: "AGENTOWL_SCHEDULER", def: "on", bound: "on or off",
		help: "off keeps this process out of the maintenance scheduler's leadership (it runs no job; another replica must)", set: offSwitch(func(c *server.Config) *bool { return &c.Maintenance.Disabled })},
	{section: "Maintenance", env: "AGENTOWL_SCHEDULER_LEASE", def: "15s", bound: "3s–10m",
		help: "the scheduler leader's lease: a dead leader's jobs move to another replica within about this",
		set:  durationWithin(func(c *server.Config) *time.Duration { return &c.Maintenance.Lease }, 3*time.Second, 10*time.Minute)},
	{section: "Maintenance", env: "AGENTOWL_OVERDUE_ACCEPT_WITHIN", def: "5m", bound: "a duration, or off",
		help: "default: work is overdue without a first callback this long after its handoff was delivered", set: overdueDuration(acceptWithin)},
	{section: "Maintenance", env: "AGENTOWL_OVERDUE_REPORT_INTERVAL", def: "30m", bound: "a duration, or off",
		help: "default: accepted or running work is overdue without a callback this often", set: overdueDuration(reportInterval)},
	{section: "Maintenance", env: "AGENTOWL_OVERDUE_INPUT_EXPIRY", def: "on", bound: "on or off",
		help: "default: needs_input work is overdue once a request expires unanswered", set: offSwitch(func(c *server.Config) *bool { return &c.Maintenance.Overdue.InputExpiryOff })},
	{section: "Maintenance", env: "AGENTOWL_RETAIN_EVENTS", def: "30d", bound: "≥ 1h (30d or 720h)",
		help: "inbound events kept from receipt, once no work refers to them", set: retention(func(r *maintenance.Retention) *time.Duration { return &r.Events }, time.Hour)},
	{section: "Maintenance", env: "AGENTOWL_RETAIN_CONVERSATIONS", def: "30d", bound: "≥ 1h",
		help: "conversations kept from their last event, once no event or work refers to them", set: retention(func(r *maintenance.Retention) *time.Duration { return &r.Conversations }, time.Hour)},
	{section: "Maintenance", env: "AGENTOWL_RETAIN_WORK", def: "30d", bound: "≥ 1h",
		help: "ended work kept from its end, once its callbacks and attention items are gone", set: retention(func(r *maintenance.Retention) *time.Duration { return &r.Work }, time.Hour)},
	{section: "Maintenance", env: "AGENTOWL_RETAIN_CALLBACKS", def: "30d", bound: "≥ 1h",
		help: "runtime callbacks kept from the end of their work", set: retention(func(r *maintenance.Retention) *time.Duration { return &r.Callbacks }, time.Hour)},
	{section: "Maintenance", env: "AGENTOWL_RETAIN_ATTENTION", def: "30d", bound: "≥ 1h",
		help: "resolved attention items (and their decisions) of ended work kept from their resolution", set: retention(func(r *maintenance.Retention) *time.Duration { return &r.Attention }, time.Hour)},
	{section: "Maintenance", env: "AGENTOWL_RETAIN_AUDIT", def: "365d", bound: "≥ 30d",
		help: "audit log entries kept from when they were recorded", set: retention(func(r *maintenance.Retention) *time.Duration { return &r.Audit }, maintenance.MinAuditRetention)},
	{section: "Maintenance", env: "AGENTOWL_RETAIN_DELIVERIES", def: "7d", bound: "≥ 7d (AAP's least)",
		help: "outbound messages kept from creation (and at least 24h after they end)",
		set:  durationWithin(func(c *server.Config) *time.Duration { return &c.Delivery.Retention }, agentowl.RetentionAfterDecision, 0)},
	{section: "Maintenance", env: "AGENTOWL_PURGE_BATCH", def: "1000", bound: "1–100000",
		help: "rows one retention transaction deletes per table", set: count(func(c *server.Config) *int { return &c.Maintenance.PurgeBatch }, 100_000)},
	{section: "Maintenance", env: "AGENTOWL_AUDIT_CHECKPOINT_EVERY", def: "1000", bound: "1–1000000",
		help: "a tenant's audit chain head is signed once this many entries followed its last checkpoint (docs/attestations.md)",
		set:  count(func(c *server.Config) *int { return &c.Maintenance.AuditCheckpoints.Every }, 1_000_000)},
	{section: "Maintenance", env: "AGENTOWL_AUDIT_CHECKPOINT_INTERVAL", def: "10m", bound: "1m–24h",
		help: "and at least this often while entries follow it: entries after the last checkpoint are protected by the chain alone",
		set:  durationWithin(func(c *server.Config) *time.Duration { return &c.Maintenance.AuditCheckpoints.Interval }, time.Minute, 24*time.Hour)},

	{section: "Attestations", env: "AGENTOWL_ATTESTATIONS", def: "on", bound: "on or off",
		help: "sign every approval and denial (docs/attestations.md); off only to measure their cost: decisions then carry none", set: offSwitch(func(c *server.Config) *bool { return &c.NoAttestations })},
	{section: "Attestations", env: "AGENTOWL_ATTESTATION_KEY_RETENTION", def: "30d", bound: "≥ 1h (30d or 720h)",
		help: "a retired attestation key stays in the JWK Set this long after the last attestation it signed expired, and at least as long as AGENTOWL_RETAIN_AUDIT (the audit checkpoints it signed must still verify)",
		set:  durationWithin(func(c *server.Config) *time.Duration { return &c.Attestation.Retention }, time.Hour, 0)},

	{section: "Web console", env: "AGENTOWL_CONSOLE_SESSION_IDLE", def: "30m", bound: "a positive duration",
		help: "a console session ends after this long without a request", set: duration(func(c *server.Config) *time.Duration { return &c.Access.SessionIdle })},
	{section: "Web console", env: "AGENTOWL_CONSOLE_SESSION_MAX", def: "12h", bound: "a positive duration",
		help: "a console session ends this long after sign-in, however active", set: duration(func(c *server.Config) *time.Duration { return &c.Access.SessionMax })},
	{section: "Web console", env: "AGENTOWL_CONSOLE_LOGIN_LINK_TTL", def: "15m", bound: "a positive duration",
		help: "how long a one-time login link (`agentowl console login-link`) may be used", set: duration(func(c *server.Config) *time.Duration { return &c.Access.LoginLinkTTL })},
}

// serveFlags registers the flags of the settings that have one.
func serveFlags(fs *pflag.FlagSet) map[string]*string {
	vals := map[string]*string{}
	for _, s := range settings {
		if s.flag != "" {
			vals[s.flag] = fs.String(s.flag, "", fmt.Sprintf("%s (env %s, default %s)", s.help, s.env, s.def))
		}
	}
	return vals
}

// configure fills cfg from the flags that were given and the environment;
// an error names the setting.
func configure(cfg *server.Config, fs *pflag.FlagSet, getenv func(string) string) error {
	for _, s := range settings {
		v := getenv(s.env)
		if s.flag != "" && fs.Changed(s.flag) {
			v, _ = fs.GetString(s.flag)
		}
		if v == "" {
			continue
		}
		if err := s.set(cfg, v); err != nil {
			return fmt.Errorf("%s: %w", s.env, err)
		}
	}
	return nil
}

// settingsHelp is the settings part of `agentowl serve --help`.
func settingsHelp() string {
	var b strings.Builder
	b.WriteString("Settings (flags win over the environment; docs/settings.md has the same list):\n")
	section := ""
	for _, s := range settings {
		if s.section != section {
			section = s.section
			fmt.Fprintf(&b, "\n%s\n", section)
		}
		name := s.env
		if s.flag != "" {
			name += ", --" + s.flag
		}
		fmt.Fprintf(&b, "  %s\n      %s. Default: %s. Accepts: %s.\n", name, s.help, s.def, s.bound)
	}
	return b.String()
}

// settingsMarkdown is docs/settings.md; a test keeps the file equal to it.
func settingsMarkdown() string {
	var b strings.Builder
	b.WriteString("# `agentowl serve` settings\n\n")
	b.WriteString("Generated from the settings table in `cmd/agentowl/settings.go`, which also prints\n")
	b.WriteString("`agentowl serve --help`; `go test ./cmd/agentowl` fails when this file is out of date\n")
	b.WriteString("(regenerate it with `AGENTOWL_WRITE_SETTINGS_DOC=1 go test ./cmd/agentowl -run TestSettingsDoc`).\n")
	b.WriteString("A flag wins over its variable; an unset setting keeps its default. A bad value stops\n")
	b.WriteString("`serve` with the variable's name. docs/limits.md explains what each limit bounds.\n")
	section := ""
	for _, s := range settings {
		if s.section != section {
			section = s.section
			fmt.Fprintf(&b, "\n## %s\n\n| variable | flag | default | accepts | what |\n| --- | --- | --- | --- | --- |\n", section)
		}
		flag := "—"
		if s.flag != "" {
			flag = "`--" + s.flag + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", s.env, flag, s.def, s.bound, s.help)
	}
	return b.String()
}

// ---- value parsers

// parsed sets the field to what parse makes of the value; a value parse
// refuses stops serve with its error.
func parsed[T any](parse func(string) (T, error), field func(*server.Config) *T) func(*server.Config, string) error {
	return func(c *server.Config, v string) error {
		x, err := parse(v)
		*field(c) = x
		return err
	}
}

func text(field func(*server.Config) *string) func(*server.Config, string) error {
	return func(c *server.Config, v string) error { *field(c) = v; return nil }
}

func duration(field func(*server.Config) *time.Duration) func(*server.Config, string) error {
	return func(c *server.Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("%q is not a positive duration such as 5s", v)
		}
		*field(c) = d
		return nil
	}
}

func positive(v string, most int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a positive whole number", v)
	}
	if most > 0 && n > most {
		return 0, fmt.Errorf("%d is more than the most, %d", n, most)
	}
	return n, nil
}

// count parses a positive whole number of at most most (0: unbounded).
func count(field func(*server.Config) *int, most int) func(*server.Config, string) error {
	return parsed(func(v string) (int, error) { return positive(v, most) }, field)
}

// byteCount parses a positive number of bytes of at most most (0:
// unbounded).
func byteCount(field func(*server.Config) *int64, most int) func(*server.Config, string) error {
	return parsed(func(v string) (int64, error) {
		n, err := positive(v, most)
		return int64(n), err
	}, field)
}

func perMinute(field func(*server.Config) *ratelimit.Limit) func(*server.Config, string) error {
	return parsed(func(v string) (ratelimit.Limit, error) {
		n, err := positive(v, 0)
		return ratelimit.Limit{Events: n, Per: time.Minute}, err
	}, field)
}

func databaseURL(c *server.Config, v string) error {
	if !server.IsPostgresURL(v) {
		return errors.New("the database URL must start with postgres:// or postgresql://")
	}
	c.DatabaseURL = v
	return nil
}

// parseKey parses a secret key setting: the base64 of 32 bytes.
func parseKey(v string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
	if err != nil || len(key) != 32 {
		return nil, errors.New("must be the base64 of exactly 32 bytes (openssl rand -base64 32)")
	}
	return key, nil
}

// offSwitch parses on or off into a field that says what is off.
func offSwitch(field func(*server.Config) *bool) func(*server.Config, string) error {
	return parsed(func(v string) (bool, error) {
		switch v {
		case "on":
			return false, nil
		case "off":
			return true, nil
		}
		return false, fmt.Errorf("%q is not on or off", v)
	}, field)
}

// ---- maintenance values

// parseDays is a positive Go duration, or a whole number of days ("30d").
func parseDays(v string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(v, "d"); ok {
		if days, err := strconv.Atoi(n); err == nil && days > 0 {
			return time.Duration(days) * 24 * time.Hour, nil
		}
	} else if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d, nil
	}
	return 0, fmt.Errorf("%q is not a positive duration such as 720h or 30d", v)
}

// durationWithin parses a duration of least to most (0: unbounded).
func durationWithin(field func(*server.Config) *time.Duration, least, most time.Duration) func(*server.Config, string) error {
	return func(c *server.Config, v string) error {
		d, err := parseDays(v)
		switch {
		case err != nil:
			return err
		case d < least:
			return fmt.Errorf("%s is less than the least, %s", d, least)
		case most > 0 && d > most:
			return fmt.Errorf("%s is more than the most, %s", d, most)
		}
		*field(c) = d
		return nil
	}
}

func retention(field func(*maintenance.Retention) *time.Duration, least time.Duration) func(*server.Config, string) error {
	return durationWithin(func(c *server.Config) *time.Duration { return field(&c.Maintenance.Retention) }, least, 0)
}

func acceptWithin(c *server.Config) *time.Duration   { return &c.Maintenance.Overdue.AcceptWithin }
func reportInterval(c *server.Config) *time.Duration { return &c.Maintenance.Overdue.ReportInterval }

// overdueDuration parses an expectation: a positive duration, or off.
func overdueDuration(field func(*server.Config) *time.Duration) func(*server.Config, string) error {
	return func(c *server.Config, v string) error {
		if v == "off" {
			*field(c) = maintenance.Off
			return nil
		}
		return durationWithin(field, time.Second, 0)(c, v)
	}
}
