package aap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/agentowl/agentowl/webhook"
)

// Submission is one instance creation or delivery replacement, prepared
// before it is sent so that a retry sends exactly the same thing: the same
// Idempotency-Key, registration ID and secret. Save it (Save writes mode
// 0600: it holds the secret) before calling Provision or ReplaceDelivery,
// and reuse it until they succeed.
type Submission struct {
	IdempotencyKey string `json:"idempotency_key"`
	RegistrationID string `json:"registration_id"`
	// Secret is the whsec_ signing secret shared with the provider and the
	// receiver only; never give it to the agent.
	Secret string `json:"signing_secret"`
	// Name is the instance name (creation only; "" lets the provider choose).
	Name string `json:"instance_name,omitempty"`
	// URL is the receiver's public HTTPS URL.
	URL string `json:"url"`
}

// NewSubmission prepares a submission with a fresh idempotency key, a fresh
// registration ID (a UUID) and a fresh 32-byte whsec_ secret.
func NewSubmission(name, receiverURL string) *Submission {
	return &Submission{IdempotencyKey: uuid.NewString(), RegistrationID: uuid.NewString(), Secret: webhook.NewSecret(),
		Name: name, URL: receiverURL}
}

// Save writes s to path with mode 0600, atomically.
func (s *Submission) Save(path string) error { return writeSecretJSON(path, s) }

// LoadSubmission reads a submission saved by Save.
func LoadSubmission(path string) (*Submission, error) {
	return readJSON[Submission](path)
}

// Credential is an instance and its credential, as provisioning returns
// them. Keep it in a file of mode 0600 (Save) that only the harness reads.
type Credential struct {
	// Provider is the provider's base URL.
	Provider     string     `json:"provider"`
	InstanceID   string     `json:"instance_id"`
	InstanceName string     `json:"instance_name"`
	Token        string     `json:"credential"`
	ExpiresAt    *time.Time `json:"expires_at,omitempty"`
	// RegistrationID is the receiver registration of the instance's delivery.
	RegistrationID string `json:"registration_id,omitempty"`
}

// Save writes c to path with mode 0600, atomically.
func (c *Credential) Save(path string) error { return writeSecretJSON(path, c) }

// LoadCredential reads a credential saved by Save.
func LoadCredential(path string) (*Credential, error) {
	return readJSON[Credential](path)
}

// Client returns a provider client that uses the credential.
func (c *Credential) Client(hc *http.Client) *Client {
	return &Client{BaseURL: c.Provider, Token: c.Token, HTTP: hc}
}

// Provisioner creates instances with verified receivers and replaces their
// delivery, keeping the receiver's registrations in step.
type Provisioner struct {
	// Provider calls the provider with the provisioner token. Required.
	Provider *Client
	// Registrations is the store of the receiver that will get the
	// instance's webhooks (the same one its Receiver uses). Required.
	Registrations ReceiverStore
	// Clock stamps registrations. Defaults to the system clock.
	Clock Clock
}

type wireInstance struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Delivery *struct {
		Type           string `json:"type"`
		URL            string `json:"url"`
		RegistrationID string `json:"registration_id"`
	} `json:"delivery"`
}

func (p *Provisioner) register(ctx context.Context, s *Submission) error {
	if !validUUID(s.RegistrationID) || s.IdempotencyKey == "" || s.URL == "" {
		return errors.New("aap: the submission needs an idempotency key, a UUID registration ID and a URL")
	}
	if _, err := webhook.ParseSecret(s.Secret); err != nil {
		return err
	}
	return p.Registrations.PutRegistration(ctx, &Registration{ID: s.RegistrationID, Secret: s.Secret, CreatedAt: clockOr(p.Clock).Now()})
}

func (s *Submission) delivery() map[string]string {
	return map[string]string{"type": "webhook", "url": s.URL, "registration_id": s.RegistrationID, "signing_secret": s.Secret}
}

// Provision creates an instance whose webhooks go to s.URL: it stores the
// registration on the receiver, then calls POST /v1/instances with
// s.IdempotencyKey (the provider verifies the receiver before it answers),
// then confirms the registration's binding to the new instance. Calling it
// again with the same submission after a failure retries the same
// submission and returns the same instance and credential.
//
// A submission without a URL creates an instance without delivery, for a
// harness that waits for decisions by polling (such as the MCP gateway in
// its synchronous mode); Registrations is not used then.
func (p *Provisioner) Provision(ctx context.Context, s *Submission) (*Credential, error) {
	polling := s.URL == ""
	body := map[string]any{}
	if polling {
		if s.IdempotencyKey == "" {
			return nil, errors.New("aap: the submission needs an idempotency key")
		}
	} else {
		if err := p.register(ctx, s); err != nil {
			return nil, err
		}
		body["delivery"] = s.delivery()
	}
	if s.Name != "" {
		body["instance_name"] = s.Name
	}
	data, _, err := p.Provider.do(ctx, http.MethodPost, "/v1/instances", body, map[string]string{"Idempotency-Key": s.IdempotencyKey})
	if err != nil {
		return nil, err
	}
	var out struct {
		Instance   wireInstance `json:"instance"`
		Credential struct {
			Token     string  `json:"token"`
			ExpiresAt *string `json:"expires_at"`
		} `json:"credential"`
	}
	if err := strictDecode(data, &out); err != nil {
		return nil, fmt.Errorf("%w: instance: %v", ErrInvalidResponse, err)
	}
	if polling {
		if !validUUID(out.Instance.ID) || out.Instance.Delivery != nil {
			return nil, fmt.Errorf("%w: the instance %q is not the submitted one (an ID, no delivery)", ErrInvalidResponse, out.Instance.ID)
		}
	} else if err := checkInstance(&out.Instance, s); err != nil {
		return nil, err
	}
	if out.Credential.Token == "" {
		return nil, fmt.Errorf("%w: no credential in the answer", ErrInvalidResponse)
	}
	c := &Credential{Provider: p.Provider.BaseURL, InstanceID: out.Instance.ID, InstanceName: out.Instance.Name,
		Token: out.Credential.Token}
	if !polling {
		c.RegistrationID = s.RegistrationID
	}
	if out.Credential.ExpiresAt != nil {
		t, err := parseTime(*out.Credential.ExpiresAt)
		if err != nil {
			return nil, fmt.Errorf("%w: credential expires_at: %v", ErrInvalidResponse, err)
		}
		c.ExpiresAt = &t
	}
	if polling {
		return c, nil
	}
	if err := p.Registrations.BindRegistration(ctx, s.RegistrationID, c.InstanceID, true); err != nil {
		return nil, err
	}
	return c, nil
}

func checkInstance(in *wireInstance, s *Submission) error {
	if !validUUID(in.ID) {
		return fmt.Errorf("%w: instance id %q is not a UUID", ErrInvalidResponse, in.ID)
	}
	if in.Delivery == nil || in.Delivery.RegistrationID != s.RegistrationID || in.Delivery.URL != s.URL {
		return fmt.Errorf("%w: the instance does not carry the submitted delivery", ErrInvalidResponse)
	}
	return nil
}

// ReplaceDelivery replaces an instance's delivery with s (a new
// registration ID and secret; the URL may stay the same): it stores the new
// registration, calls PATCH /v1/instances/{id} with s.IdempotencyKey (the
// provider verifies the new receiver first), confirms the new binding and
// then forgets the instance's other registrations on this receiver, so the
// old secret stops being accepted. Retry with the same submission.
func (p *Provisioner) ReplaceDelivery(ctx context.Context, instanceID string, s *Submission) error {
	if !validUUID(instanceID) {
		return fmt.Errorf("aap: instance ID %q is not a UUID", instanceID)
	}
	if err := p.register(ctx, s); err != nil {
		return err
	}
	data, _, err := p.Provider.do(ctx, http.MethodPatch, "/v1/instances/"+url.PathEscape(instanceID),
		map[string]any{"delivery": s.delivery()}, map[string]string{"Idempotency-Key": s.IdempotencyKey})
	if err != nil {
		return err
	}
	var in wireInstance
	if err := strictDecode(data, &in); err != nil {
		return fmt.Errorf("%w: instance: %v", ErrInvalidResponse, err)
	}
	if err := checkInstance(&in, s); err != nil {
		return err
	}
	if in.ID != instanceID {
		return fmt.Errorf("%w: asked to update %s, got %s", ErrInvalidResponse, instanceID, in.ID)
	}
	if err := p.Registrations.BindRegistration(ctx, s.RegistrationID, instanceID, true); err != nil {
		return err
	}
	regs, err := p.Registrations.InstanceRegistrations(ctx, instanceID)
	if err != nil {
		return err
	}
	for _, r := range regs {
		if r.ID != s.RegistrationID {
			if err := p.Registrations.DeleteRegistration(ctx, r.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeSecretJSON writes v as JSON to path with mode 0600 through a
// temporary file and a rename, so a crash leaves the old or the new file.
func writeSecretJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// readJSON reads a file that writeSecretJSON wrote.
func readJSON[T any](path string) (*T, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	return &v, nil
}
