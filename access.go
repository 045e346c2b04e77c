package agentowl

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"regexp"
	"strings"
	"time"
)

// Tenant is an isolated account: every other object belongs to exactly one.
type Tenant struct {
	ID   string
	Name string
	// System marks the one tenant whose admins may create tenants: the first
	// tenant bootstrapped on an empty database.
	System    bool
	CreatedAt time.Time
}

var slugPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// ValidSlug reports whether s is a valid tenant or operator name:
// 1–63 lowercase letters, digits and hyphens, starting with a letter or digit.
func ValidSlug(s string) bool { return slugPattern.MatchString(s) }

// Role is an operator's role within one tenant.
type Role string

const (
	// RoleAdmin may change the tenant's configuration and credentials.
	RoleAdmin Role = "admin"
	// RoleMember may read and decide, but not manage credentials or operators.
	RoleMember Role = "member"
)

// Operator is a named person acting in exactly one tenant, with one role
// there. A person who works in two tenants is two operators, each created by
// an admin of its own tenant; a name is unique within its tenant only.
type Operator struct {
	ID        string
	TenantID  string
	Name      string
	Role      Role
	CreatedAt time.Time
}

// Membership is the one tenant an operator token acts in (its operator's)
// and the operator's role there. "Scope" means only a credential's
// permissions (runtime credential scopes); membership is this.
type Membership struct {
	OperatorID string
	TenantID   string
	TenantName string
	Role       Role
}

// TokenKind names what a bearer token may do. Kinds are never interchangeable.
type TokenKind string

const (
	// TokenOperator authorizes the operator API in the one tenant that
	// issued it, as its operator (who belongs to that tenant).
	TokenOperator TokenKind = "operator"
	// TokenProvisioner authorizes instance management within its tenant.
	TokenProvisioner TokenKind = "provisioner"
	// TokenInstance authorizes approval requests of one instance.
	TokenInstance TokenKind = "instance"
	// TokenRuntime authorizes an agent runtime's reports (and, with their
	// scopes, reads) for the work of one endpoint. Runtime credentials are
	// kept apart from the other kinds (see internal/work).
	TokenRuntime TokenKind = "runtime"
)

// tokenPrefixes makes a token's kind readable at a glance (and greppable by
// secret scanners); the kind is still taken from the stored record.
var tokenPrefixes = map[TokenKind]string{
	TokenOperator:    "owl_op_",
	TokenProvisioner: "owl_prov_",
	TokenInstance:    "owl_inst_",
	TokenRuntime:     "owl_rt_",
}

// Token is the stored record of a bearer credential; the secret itself is
// never stored, only its SHA-256.
type Token struct {
	ID         string
	Kind       TokenKind
	Hash       []byte
	TenantID   string
	OperatorID string // operator tokens
	InstanceID string // instance credentials
	Label      string
	CreatedAt  time.Time
	ExpiresAt  *time.Time
	RevokedAt  *time.Time
}

// Active reports whether t may authenticate at now.
func (t *Token) Active(now time.Time) bool {
	if t.RevokedAt != nil {
		return false
	}
	return t.ExpiresAt == nil || now.Before(*t.ExpiresAt)
}

// NewTokenSecret returns a fresh bearer token of kind: its readable prefix and
// 32 random bytes in unpadded base64url.
func NewTokenSecret(kind TokenKind) string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return tokenPrefixes[kind] + base64.RawURLEncoding.EncodeToString(b[:])
}

// HashToken returns the digest under which a token secret is stored.
func HashToken(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

// TokenMatches compares a presented secret with a stored hash in constant time.
func TokenMatches(secret string, hash []byte) bool {
	return subtle.ConstantTimeCompare(HashToken(secret), hash) == 1
}

// TokenKindOf returns the kind a secret's prefix claims, if any.
func TokenKindOf(secret string) (TokenKind, bool) {
	for k, p := range tokenPrefixes {
		if strings.HasPrefix(secret, p) {
			return k, true
		}
	}
	return "", false
}

// AuditEntry is one appended configuration change.
type AuditEntry struct {
	ID        int64
	TenantID  string
	At        time.Time
	Actor     string
	Action    string
	Target    string
	RequestID string
	Details   map[string]any
	// The tenant's hash chain (internal/auditchain): the entry's place in
	// it from 1 (0 for one written past the chain), the hash it chains to
	// and its own. AuditAppend sets them with ID, after the commit.
	Seq            int64
	PrevHash, Hash []byte
	// DetailsJSON is Details as stored, the text the chain's hash covers;
	// set by AuditChainList.
	DetailsJSON []byte
}
