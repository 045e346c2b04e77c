package attest

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// KeySet finds the public key of a kid. StaticKeys and RemoteKeySet
// implement it.
type KeySet interface {
	// PublicKey returns the Ed25519 public key named kid, or an error
	// wrapping ErrUnknownKey.
	PublicKey(ctx context.Context, kid string) (ed25519.PublicKey, error)
}

// JWK is one public key of a JWK Set (RFC 7517) as the provider publishes
// it: an OKP key on Ed25519 (RFC 8037).
type JWK struct {
	Kty string `json:"kty"` // "OKP"
	Crv string `json:"crv"` // "Ed25519"
	// X is the public key, base64url without padding.
	X   string `json:"x"`
	Kid string `json:"kid"`
	Use string `json:"use,omitempty"` // "sig"
	Alg string `json:"alg,omitempty"` // "EdDSA"
}

// JWKS is a JWK Set document: {"keys": [...]}.
type JWKS struct {
	Keys []JWK `json:"keys"`
}

// PublicJWK returns the JWK of an Ed25519 public key.
func PublicJWK(kid string, pub ed25519.PublicKey) JWK {
	return JWK{Kty: "OKP", Crv: "Ed25519", X: b64.EncodeToString(pub), Kid: kid, Use: "sig", Alg: Algorithm}
}

// KeyID derives a kid from a public key: "ed25519-" and the first 16
// bytes of its SHA-256 in base64url. The provider names its keys so; a
// verifier never relies on it.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "ed25519-" + b64.EncodeToString(sum[:16])
}

// StaticKeys is a fixed key set, by kid.
type StaticKeys map[string]ed25519.PublicKey

// PublicKey implements KeySet.
func (k StaticKeys) PublicKey(_ context.Context, kid string) (ed25519.PublicKey, error) {
	if pub, ok := k[kid]; ok {
		return pub, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownKey, kid)
}

// ParseJWKS reads a JWK Set. Keys this package cannot use (another kty,
// crv or use, an alg other than EdDSA) are skipped, as RFC 7517 §5 asks;
// a usable key without a kid, with a bad x, or with a kid seen before is
// an error.
func ParseJWKS(data []byte) (StaticKeys, error) {
	var set JWKS
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("attest: JWK Set: %w", err)
	}
	if set.Keys == nil {
		return nil, errors.New(`attest: JWK Set: no "keys" member`)
	}
	out := StaticKeys{}
	for _, k := range set.Keys {
		if k.Kty != "OKP" || k.Crv != "Ed25519" || (k.Use != "" && k.Use != "sig") || (k.Alg != "" && k.Alg != Algorithm) {
			continue
		}
		x, err := b64.DecodeString(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("attest: JWK Set: key %q: x is not a base64url Ed25519 public key", k.Kid)
		}
		if k.Kid == "" {
			return nil, errors.New("attest: JWK Set: an Ed25519 key has no kid")
		}
		if _, dup := out[k.Kid]; dup {
			return nil, fmt.Errorf("attest: JWK Set: kid %q appears twice", k.Kid)
		}
		out[k.Kid] = ed25519.PublicKey(x)
	}
	return out, nil
}

// RemoteKeySet is the key set published at a JWKS URL, fetched on first
// use and cached. An unknown kid refreshes it (a key rotated in since),
// at most once per MinRefresh; the whole set is refetched after MaxAge.
// It is safe for concurrent use.
type RemoteKeySet struct {
	url    string
	client *http.Client
	// MinRefresh is the least time between two fetches caused by unknown
	// kids, so that tokens naming made-up kids cannot make it fetch on
	// every call. Default 30s.
	MinRefresh time.Duration
	// MaxAge is how long a fetched set is used before it is fetched again.
	// Default 10 minutes.
	MaxAge time.Duration
	// Now returns the time; time.Now when nil (tests drive it).
	Now func() time.Time

	mu      sync.Mutex
	keys    StaticKeys
	fetched time.Time // when keys were fetched; zero: never
	tried   time.Time // when the last fetch was attempted
}

// MaxJWKSSize bounds the JWK Set a RemoteKeySet reads, in bytes.
const MaxJWKSSize = 1 << 20

// NewRemoteKeySet returns the key set published at url, fetched with
// client (the caller's client, such as one that limits egress; nil for
// http.DefaultClient).
func NewRemoteKeySet(url string, client *http.Client) *RemoteKeySet {
	if client == nil {
		client = http.DefaultClient
	}
	return &RemoteKeySet{url: url, client: client}
}

func (r *RemoteKeySet) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// PublicKey implements KeySet: from the cached set, refreshing it when it
// is older than MaxAge or does not hold kid.
func (r *RemoteKeySet) PublicKey(ctx context.Context, kid string) (ed25519.PublicKey, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	maxAge, minRefresh := r.MaxAge, r.MinRefresh
	if maxAge <= 0 {
		maxAge = 10 * time.Minute
	}
	if minRefresh <= 0 {
		minRefresh = 30 * time.Second
	}
	stale := r.keys == nil || now.Sub(r.fetched) >= maxAge
	_, known := r.keys[kid]
	if stale || (!known && now.Sub(r.tried) >= minRefresh) {
		if err := r.fetch(ctx, now); err != nil && r.keys == nil {
			return nil, err
		}
	}
	if pub, ok := r.keys[kid]; ok {
		return pub, nil
	}
	return nil, fmt.Errorf("%w: %q is not published at %s", ErrUnknownKey, kid, r.url)
}

// Refresh fetches the set now.
func (r *RemoteKeySet) Refresh(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fetch(ctx, r.now())
}

func (r *RemoteKeySet) fetch(ctx context.Context, now time.Time) error {
	r.tried = now
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url, nil)
	if err != nil {
		return fmt.Errorf("attest: JWK Set: %w", err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("attest: JWK Set: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("attest: JWK Set: %s answered %s", r.url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxJWKSSize+1))
	if err != nil {
		return fmt.Errorf("attest: JWK Set: %w", err)
	}
	if len(body) > MaxJWKSSize {
		return fmt.Errorf("attest: JWK Set: larger than %d bytes", MaxJWKSSize)
	}
	keys, err := ParseJWKS(body)
	if err != nil {
		return err
	}
	r.keys, r.fetched = keys, now
	return nil
}
