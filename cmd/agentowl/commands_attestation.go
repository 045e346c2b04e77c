package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentowl/agentowl/attest"
	"github.com/agentowl/agentowl/internal/server"
)

// Decision attestations (docs/attestations.md): `agentowl attestation
// verify` checks one against a published JWK Set, as an upstream service
// or an auditor would; `agentowl attestation-keys list` and `rotate`
// manage the signing keys directly against the database, like `secrets
// rotate-key`.

func (c *cli) attestationCommands() []*cobra.Command {
	return []*cobra.Command{c.attestationCommand(), c.attestationKeysCommand()}
}

// printAttestation shows a verified document's facts.
func printAttestation(w io.Writer, kid string, d *attest.Document) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "verified\tsigned by key %s\n", kid)
	fmt.Fprintf(tw, "issuer\t%s\n", d.Issuer)
	fmt.Fprintf(tw, "id\t%s\n", d.ID)
	fmt.Fprintf(tw, "tenant\t%s\n", d.Tenant)
	switch d.Subject.Kind {
	case attest.SubjectWorkRequest:
		fmt.Fprintf(tw, "subject\twork %s, request %s revision %d, decision %s\n", d.Subject.WorkID, d.Subject.RequestID,
			d.Subject.Revision, d.Subject.DecisionID)
	default:
		fmt.Fprintf(tw, "subject\tAAP request %s\n", d.Subject.RequestID)
	}
	if d.Action.Tool != "" {
		fmt.Fprintf(tw, "tool\t%s\n", d.Action.Tool)
		fmt.Fprintf(tw, "arguments sha256\t%s\n", d.Action.ArgumentsSHA256)
	}
	if d.Action.Digest != "" {
		fmt.Fprintf(tw, "action digest\t%s\n", d.Action.Digest)
	}
	if d.Action.AnswerSHA256 != "" {
		fmt.Fprintf(tw, "answer sha256\t%s\n", d.Action.AnswerSHA256)
	}
	fmt.Fprintf(tw, "decision\t%s\n", d.Decision)
	by := d.DecidedBy.Name
	if d.DecidedBy.PolicyID != "" {
		by = d.DecidedBy.PolicyID
	}
	fmt.Fprintf(tw, "decided by\t%s %s\n", d.DecidedBy.Kind, by)
	fmt.Fprintf(tw, "decided at\t%s\n", d.DecidedAt.UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(tw, "expires at\t%s\n", d.ExpiresAt.UTC().Format(time.RFC3339Nano))
	tw.Flush()
}

func (c *cli) attestationCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "attestation", Short: "Decision attestations: verify one against the provider's published keys"}
	var jwks, issuer, requestID, workID, tool, argsFile, digest, decision, at string
	var anyTime bool
	verify := &cobra.Command{
		Use:   "verify FILE|-",
		Short: "Verify a decision attestation (a compact JWS) against a JWK Set",
		Long: `Verifies a decision attestation (docs/attestations.md): its Ed25519 signature with the key
its kid names in the JWK Set --jwks (an https:// URL, such as the provider's
/.well-known/agentowl/jwks.json, or a file), then what you ask of it: --issuer, --request
(and --work for a runtime request), --tool and --arguments (a JSON file whose canonical
digest must be the attested one), --action-digest, --decision. It must not have expired at
--at (default now) unless --any-time is given (an auditor checking an old decision).

FILE holds the token, or the JSON answer of an attestation route ({"attestation": …});
- reads it from standard input. Exits non-zero when anything does not hold.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			token, err := readAttestation(cmd.InOrStdin(), args[0])
			if err != nil {
				return err
			}
			keys, err := loadJWKS(cmd.Context(), jwks)
			if err != nil {
				return err
			}
			t, err := attest.Parse(token)
			if err != nil {
				return err
			}
			if err := t.VerifySignature(cmd.Context(), keys); err != nil {
				return err
			}
			doc := t.Document
			if err := checkAttestation(doc, issuer, requestID, workID, tool, argsFile, digest, decision, at, anyTime); err != nil {
				return err
			}
			return c.emit(map[string]any{"verified": true, "key_id": t.KeyID, "document": doc},
				func(w io.Writer) { printAttestation(w, t.KeyID, doc) })
		},
	}
	f := verify.Flags()
	f.StringVar(&jwks, "jwks", "", "the JWK Set: an https:// (or http://) URL, or a file (required)")
	f.StringVar(&issuer, "issuer", "", "the issuer required (the provider's public URL)")
	f.StringVar(&requestID, "request", "", "the request required: an AAP request ID, or a runtime request's ID with --work")
	f.StringVar(&workID, "work", "", "the work of the runtime request required")
	f.StringVar(&tool, "tool", "", "the tool required")
	f.StringVar(&argsFile, "arguments", "", "a file holding the arguments about to run (JSON); their digest must be the attested one")
	f.StringVar(&digest, "action-digest", "", "the action digest required")
	f.StringVar(&decision, "decision", "", "the decision required: approved, denied or answered (default: any)")
	f.StringVar(&at, "at", "", "verify at this RFC 3339 time instead of now")
	f.BoolVar(&anyTime, "any-time", false, "do not refuse an expired attestation (the signature and facts still must hold)")
	_ = verify.MarkFlagRequired("jwks")
	cmd.AddCommand(verify)
	return cmd
}

// readAttestation reads the token from path (- for in): a bare compact
// JWS, or a JSON object with an "attestation" member.
func readAttestation(in io.Reader, path string) (string, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(io.LimitReader(in, attest.MaxTokenSize*4))
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(data))
	if strings.HasPrefix(s, "{") {
		var v struct {
			Attestation string `json:"attestation"`
		}
		if err := json.Unmarshal([]byte(s), &v); err != nil || v.Attestation == "" {
			return "", errors.New(`the JSON holds no "attestation"`)
		}
		s = v.Attestation
	}
	return s, nil
}

// loadJWKS reads a JWK Set from a URL or a file.
func loadJWKS(ctx context.Context, where string) (attest.KeySet, error) {
	if strings.HasPrefix(where, "https://") || strings.HasPrefix(where, "http://") {
		ks := attest.NewRemoteKeySet(where, &http.Client{Timeout: 30 * time.Second})
		return ks, ks.Refresh(ctx)
	}
	data, err := os.ReadFile(filepath.Clean(where))
	if err != nil {
		return nil, err
	}
	return attest.ParseJWKS(data)
}

// checkAttestation applies what the flags ask of a document whose
// signature verified.
func checkAttestation(d *attest.Document, issuer, requestID, workID, tool, argsFile, digest, decision, at string, anyTime bool) error {
	now := time.Now()
	if at != "" {
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return fmt.Errorf("--at: %w", err)
		}
		now = t
	}
	if !anyTime && !now.Before(d.ExpiresAt) {
		return fmt.Errorf("%w at %s (--any-time to check an old decision)", attest.ErrExpired, d.ExpiresAt.UTC().Format(time.RFC3339))
	}
	want := attest.Expectation{Issuer: issuer, Tool: tool, ActionDigest: digest, Decision: decision,
		Subject: attest.Subject{Kind: attest.SubjectAAPRequest, RequestID: requestID, WorkID: workID},
		Now:     func() time.Time { return now }}
	if argsFile != "" {
		b, err := os.ReadFile(argsFile)
		if err != nil {
			return err
		}
		want.Arguments = json.RawMessage(b)
	}
	if workID != "" {
		want.Subject.Kind = attest.SubjectWorkRequest
	}
	// What was not asked for is taken from the document: the check then
	// holds for it.
	if want.Issuer == "" {
		want.Issuer = d.Issuer
	}
	if want.Subject.RequestID == "" {
		want.Subject = d.Subject
	}
	if want.Decision == "" {
		want.Decision = d.Decision
	}
	if want.Arguments == nil && want.ActionDigest == "" {
		want.ActionDigest = d.Action.Digest // "" for a question, which has no action
	}
	if anyTime {
		want.Now = func() time.Time { return d.DecidedAt }
	}
	return d.Check(want)
}

func (c *cli) attestationKeysCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "attestation-keys", Short: "The keys that sign decision attestations: list and rotate, directly against the database"}
	var db offlineDatabase
	var retention string
	list := &cobra.Command{
		Use:   "list",
		Short: "List the attestation keys: the signing key, and retired keys with when they leave the JWK Set",
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, url, err := db.where()
			if err != nil {
				return err
			}
			keep := time.Duration(0)
			if r := envOr(retention, "AGENTOWL_ATTESTATION_KEY_RETENTION", ""); r != "" {
				if keep, err = parseDays(r); err != nil {
					return fmt.Errorf("--retention: %w", err)
				}
			}
			audit := time.Duration(0)
			if r := os.Getenv("AGENTOWL_RETAIN_AUDIT"); r != "" {
				if audit, err = parseDays(r); err != nil {
					return fmt.Errorf("AGENTOWL_RETAIN_AUDIT: %w", err)
				}
			}
			// Listing opens no private key: no secret key needed.
			st, _, err := server.OpenStore(cmd.Context(), dir, url, nil, 0)
			if err != nil {
				return err
			}
			defer st.Close()
			ks, err := server.AttestationKeys(cmd.Context(), st, nil, keep, audit)
			if err != nil {
				return err
			}
			out := make([]map[string]any, 0, len(ks))
			for _, k := range ks {
				out = append(out, keyJSON(k))
			}
			return c.emit(map[string]any{"items": out}, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "KID\tSTATE\tCREATED\tRETIRED\tLAST EXPIRY\tPUBLISHED UNTIL")
				for _, k := range ks {
					state, retired, until, last := "signing", "-", "-", "-"
					if k.RetiredAt != nil {
						state, retired, until = "retired", k.RetiredAt.UTC().Format(time.RFC3339), k.PublishedUntil.UTC().Format(time.RFC3339)
						if !k.Published {
							state = "unpublished"
						}
					}
					if !k.LastExpiresAt.IsZero() {
						last = k.LastExpiresAt.UTC().Format(time.RFC3339)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, state, k.CreatedAt.UTC().Format(time.RFC3339), retired, last, until)
				}
				tw.Flush()
			})
		},
	}
	db.flags(list)
	list.Flags().StringVar(&retention, "retention", "", "the retention to compute publication with (env AGENTOWL_ATTESTATION_KEY_RETENTION, default 30d)")
	rotate := &cobra.Command{
		Use:   "rotate",
		Short: "Generate a new signing key; the current one retires and stays published while its attestations may be checked",
		Long: `Generates a new Ed25519 signing key, sealed with the secret key like every stored secret, and
retires the current one in the same transaction. Every replica signs with the new key within a
minute; the retired key stays in the JWK Set until the last attestation it signed has expired
plus AGENTOWL_ATTESTATION_KEY_RETENTION, so attestations signed before the rotation keep
verifying. Safe while replicas run. Needs the secret key (AGENTOWL_SECRET_KEY or
DATA-DIR/secret-key).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, url, err := db.where()
			if err != nil {
				return err
			}
			key, err := keySetting("AGENTOWL_SECRET_KEY", filepath.Join(dir, "secret-key"))
			if err != nil {
				return err
			}
			if key == nil {
				return errors.New("no secret key: set AGENTOWL_SECRET_KEY or run where DATA-DIR/secret-key is")
			}
			st, _, err := server.OpenStore(cmd.Context(), dir, url, key, 0)
			if err != nil {
				return err
			}
			defer st.Close()
			k, err := server.RotateAttestationKey(cmd.Context(), st, nil)
			if err != nil {
				return err
			}
			return c.emit(keyJSON(*k), func(w io.Writer) {
				fmt.Fprintf(w, "New signing key %s. The previous key stays published while its attestations may be checked.\n", k.ID)
			})
		},
	}
	db.flags(rotate)
	cmd.AddCommand(list, rotate)
	return cmd
}

// keyJSON is a key as --json shows it: public facts only.
func keyJSON(k server.AttestationKey) map[string]any {
	m := map[string]any{"kid": k.ID, "jwk": attest.PublicJWK(k.ID, k.PublicKey), "created_at": k.CreatedAt.UTC().Format(time.RFC3339),
		"published": k.Published, "signing": k.RetiredAt == nil}
	if k.RetiredAt != nil {
		m["retired_at"] = k.RetiredAt.UTC().Format(time.RFC3339)
		m["published_until"] = k.PublishedUntil.UTC().Format(time.RFC3339)
	}
	if !k.LastExpiresAt.IsZero() {
		m["last_expires_at"] = k.LastExpiresAt.UTC().Format(time.RFC3339)
	}
	return m
}
