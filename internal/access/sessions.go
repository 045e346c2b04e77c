package access

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"github.com/agentowl/agentowl"
)

// Web console sessions (docs/console.md). An operator signs in with an
// operator token, or with a one-time login link another operator token
// issued; either way the session is vouched for by that token and lives no
// longer than it: revoking or expiring the token ends the session. A
// session also ends when idle for SessionIdle, SessionMax after sign-in, or
// at sign-out. Only the SHA-256 of a session's secret is stored.

// Readable prefixes of console secrets (never valid as bearer tokens).
const (
	sessionPrefix = "owl_cs_"
	linkPrefix    = "owl_cl_"
)

// touchEvery is how stale a session's last-seen time may be before a
// request records it again: idle expiry is that precise, and most requests
// write nothing.
const touchEvery = time.Minute

func (c Config) sessionDefaults() Config {
	if c.SessionIdle <= 0 {
		c.SessionIdle = 30 * time.Minute
	}
	if c.SessionMax <= 0 {
		c.SessionMax = 12 * time.Hour
	}
	if c.LoginLinkTTL <= 0 {
		c.LoginLinkTTL = 15 * time.Minute
	}
	return c
}

func newConsoleSecret(prefix string) string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// Session is a signed-in console session.
type Session struct {
	Record *agentowl.ConsoleSessionRecord
	// Principal acts as the session's operator in their one tenant; audit
	// entries name that operator.
	Principal *Principal
	// Secret is the session secret (the cookie value), set only when the
	// session was just made.
	Secret string
}

func sessionExpired() error {
	return agentowl.Errorf(agentowl.ECodeUnauthenticated, "The console session is missing, expired or signed out; sign in again.")
}

// SignIn makes a console session for an operator token's operator.
func (s *Service) SignIn(ctx context.Context, tokenSecret string) (*Session, error) {
	p, err := s.Authenticate(ctx, tokenSecret, agentowl.TokenOperator)
	if err != nil {
		return nil, err
	}
	return s.newSession(ctx, p, nil)
}

// newSession stores a session for principal p, vouched for by p's token;
// link, when set, is the login link it consumes in the same transaction.
func (s *Service) newSession(ctx context.Context, p *Principal, link *agentowl.ConsoleSessionRecord) (*Session, error) {
	now := s.clock.Now()
	secret := newConsoleSecret(sessionPrefix)
	rec := &agentowl.ConsoleSessionRecord{ID: agentowl.NewID(""), Kind: agentowl.ConsoleSession, Hash: agentowl.HashToken(secret),
		TenantID: p.Membership.TenantID, OperatorID: p.Operator.ID, TokenID: p.Token.ID, CreatedAt: now, LastSeenAt: now,
		ExpiresAt: now.Add(s.cfg.SessionMax)}
	if p.Token.ExpiresAt != nil && p.Token.ExpiresAt.Before(rec.ExpiresAt) {
		rec.ExpiresAt = *p.Token.ExpiresAt
	}
	err := s.store.Write(ctx, func(tx agentowl.Tx) error {
		if link != nil {
			if err := tx.ConsoleSessionUse(ctx, link.ID, now); err != nil {
				if errors.Is(err, agentowl.ErrConflict) {
					return unauthenticated()
				}
				return err
			}
		}
		if err := tx.ConsoleSessionCreate(ctx, rec); err != nil {
			return err
		}
		via := "token"
		if link != nil {
			via = "login_link"
		}
		return Audit(ctx, tx, now, rec.TenantID, p, "console.sign_in", "operator:"+p.Operator.Name, map[string]any{"via": via})
	})
	if err != nil {
		return nil, err
	}
	return &Session{Record: rec, Principal: p, Secret: secret}, nil
}

// LoginLink is a one-time console sign-in code, shown once.
type LoginLink struct {
	Secret       string
	OperatorName string
	TenantName   string
	ExpiresAt    time.Time
}

// CreateLoginLink issues a one-time login link for operator (default: the
// caller) of tenant, valid for LoginLinkTTL. The caller's token vouches for
// the session it opens. Links for someone else need the admin role.
func (s *Service) CreateLoginLink(ctx context.Context, p *Principal, tenant, operator string) (*LoginLink, error) {
	m, err := p.forOperator(tenant, operator)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	secret := newConsoleSecret(linkPrefix)
	out := &LoginLink{Secret: secret, TenantName: m.TenantName, ExpiresAt: now.Add(s.cfg.LoginLinkTTL)}
	if p.Token.ExpiresAt != nil && p.Token.ExpiresAt.Before(out.ExpiresAt) {
		out.ExpiresAt = *p.Token.ExpiresAt
	}
	err = s.store.Write(ctx, func(tx agentowl.Tx) error {
		op, err := namedOrCaller(ctx, tx, p, m, operator)
		if err != nil {
			return err
		}
		out.OperatorName = op.Name
		rec := &agentowl.ConsoleSessionRecord{ID: agentowl.NewID(""), Kind: agentowl.ConsoleLoginLink, Hash: agentowl.HashToken(secret),
			TenantID: m.TenantID, OperatorID: op.ID, TokenID: p.Token.ID, CreatedAt: now, LastSeenAt: now, ExpiresAt: out.ExpiresAt}
		if err := tx.ConsoleSessionCreate(ctx, rec); err != nil {
			return err
		}
		return Audit(ctx, tx, now, m.TenantID, p, "console.login_link", "operator:"+op.Name, nil)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// lookup returns the live record of kind for secret and the principal it
// acts as, or unauthenticated: unknown, revoked, expired, idle too long, a
// link already used, or a vouching token that is no longer active.
func (s *Service) lookup(ctx context.Context, secret, prefix string, kind agentowl.ConsoleSessionKind) (*agentowl.ConsoleSessionRecord, *Principal, error) {
	if !strings.HasPrefix(secret, prefix) || len(secret) > 256 {
		return nil, nil, sessionExpired()
	}
	var rec *agentowl.ConsoleSessionRecord
	var p *Principal
	err := s.store.Read(ctx, func(tx agentowl.Tx) error {
		r, tok, err := tx.ConsoleSessionGetByHash(ctx, agentowl.HashToken(secret))
		if err != nil {
			return err
		}
		now := s.clock.Now()
		if r.Kind != kind || !agentowl.TokenMatches(secret, r.Hash) || r.RevokedAt != nil || r.UsedAt != nil ||
			!now.Before(r.ExpiresAt) || tok.Kind != agentowl.TokenOperator || !tok.Active(now) ||
			(kind == agentowl.ConsoleSession && now.Sub(r.LastSeenAt) >= s.cfg.SessionIdle) {
			return agentowl.ErrNotFound
		}
		op, scope, err := tx.OperatorMembership(ctx, r.OperatorID)
		if err != nil {
			return err
		}
		if scope.TenantID != r.TenantID || tok.TenantID != r.TenantID {
			return agentowl.ErrNotFound // defence in depth: the schema keeps them in one tenant
		}
		rec, p = r, &Principal{Token: tok, Operator: op, Membership: scope}
		return nil
	})
	if errors.Is(err, agentowl.ErrNotFound) {
		return nil, nil, sessionExpired()
	}
	return rec, p, err
}

// InspectLoginLink returns the operator and tenant a login link signs in
// as, without using it (so that a link preview does not spend it).
func (s *Service) InspectLoginLink(ctx context.Context, secret string) (*Principal, error) {
	_, p, err := s.lookup(ctx, secret, linkPrefix, agentowl.ConsoleLoginLink)
	return p, err
}

// SignInWithLink uses a login link, once, and makes a session for its
// operator. The session is vouched for by the token that issued the link.
func (s *Service) SignInWithLink(ctx context.Context, secret string) (*Session, error) {
	rec, p, err := s.lookup(ctx, secret, linkPrefix, agentowl.ConsoleLoginLink)
	if err != nil {
		return nil, err
	}
	return s.newSession(ctx, p, rec)
}

// AuthenticateSession resolves a session secret to its session. With
// touch it records the activity that keeps the session from idling out (a
// person's request, not a page refreshing itself).
func (s *Service) AuthenticateSession(ctx context.Context, secret string, touch bool) (*Session, error) {
	rec, p, err := s.lookup(ctx, secret, sessionPrefix, agentowl.ConsoleSession)
	if err != nil {
		return nil, err
	}
	if now := s.clock.Now(); touch && now.Sub(rec.LastSeenAt) >= touchEvery {
		if err := s.store.Write(ctx, func(tx agentowl.Tx) error { return tx.ConsoleSessionTouch(ctx, rec.ID, now) }); err != nil {
			return nil, err
		}
		rec.LastSeenAt = now
	}
	return &Session{Record: rec, Principal: p}, nil
}

// SignOut ends a session. Signing out of an ended session changes nothing.
func (s *Service) SignOut(ctx context.Context, sess *Session) error {
	now := s.clock.Now()
	return s.store.Write(ctx, func(tx agentowl.Tx) error {
		if err := tx.ConsoleSessionRevoke(ctx, sess.Record.ID, now); err != nil {
			return err
		}
		return Audit(ctx, tx, now, sess.Record.TenantID, sess.Principal, "console.sign_out", "operator:"+sess.Principal.Operator.Name, nil)
	})
}
