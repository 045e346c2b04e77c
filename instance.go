package agentowl

import (
	"encoding/base64"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Instance is one provisioned agent identity whose adapter submits approval
// requests with the instance credential.
type Instance struct {
	ID                 string
	TenantID           string
	Name               string
	ProvisionerTokenID string
	Receiver           *Receiver
	ApprovalValidity   time.Duration
	CreatedAt          time.Time
	DeletedAt          *time.Time
}

// Receiver is an instance's verified webhook receiver: the AAP contract's
// "delivery" object (a different thing from the delivery engine that sends
// to it). The signing secret is write-only: it is never returned by any API.
type Receiver struct {
	Type           string
	URL            string
	RegistrationID string
	SigningSecret  string
}

// DeliveryTypeWebhook is the only delivery type AAP v1 defines.
const DeliveryTypeWebhook = "webhook"

var (
	webhookURLPattern    = regexp.MustCompile(`^https://[^/?#@\s]+([/?][^#\s]*)?$`)
	signingSecretPattern = regexp.MustCompile(`^whsec_[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$`)
	uuidPattern          = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
)

// ValidUUID reports whether s is a UUID in its canonical textual form.
func ValidUUID(s string) bool { return uuidPattern.MatchString(s) }

// ValidateWebhookURL checks the syntax rules of the contract's WebhookURL:
// HTTPS, a host, no userinfo, no fragment. Address checks happen at dial time.
func ValidateWebhookURL(raw string) error {
	bad := func(why string) error {
		return FieldError(ECodeInvalidWebhookURL, "delivery.url", "The webhook URL %s.", why)
	}
	if len(raw) > 2048 {
		return bad("is longer than 2048 characters")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("is not a valid URL")
	}
	switch {
	case u.Scheme != "https":
		return bad("must use https")
	case u.User != nil || strings.Contains(u.Host, "@"):
		return bad("must not contain userinfo")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return bad("must not contain a fragment")
	case u.Hostname() == "":
		return bad("must name a host")
	case !webhookURLPattern.MatchString(raw):
		return bad("is malformed")
	}
	return nil
}

// ValidateSigningSecret checks a whsec_ secret: canonical padded base64 of
// exactly 32 bytes.
func ValidateSigningSecret(s string) error {
	if !signingSecretPattern.MatchString(s) {
		return FieldError(ECodeInvalidField, "delivery.signing_secret",
			"The signing secret must be whsec_ followed by the canonical padded base64 of exactly 32 bytes.")
	}
	if b, err := base64.StdEncoding.Strict().DecodeString(s[len("whsec_"):]); err != nil || len(b) != 32 {
		return FieldError(ECodeInvalidField, "delivery.signing_secret", "The signing secret must encode exactly 32 bytes.")
	}
	return nil
}

// Validate checks a proposed receiver (the contract's delivery object) in
// full.
func (d *Receiver) Validate() error {
	if d.Type != DeliveryTypeWebhook {
		return FieldError(ECodeUnsupportedDelivery, "delivery.type", "Only the webhook delivery type is supported.")
	}
	if err := ValidateWebhookURL(d.URL); err != nil {
		return err
	}
	if !ValidUUID(d.RegistrationID) {
		return FieldError(ECodeInvalidField, "delivery.registration_id", "The registration ID must be a UUID.")
	}
	return ValidateSigningSecret(d.SigningSecret)
}
