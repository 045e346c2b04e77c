package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentowl/agentowl/attest"
	"github.com/agentowl/agentowl/internal/auditchain"
)

// `agentowl audit export` and `audit verify`: the tenant's audit hash
// chain (docs/attestations.md, "The audit chain") read from the operator
// API page by page, written as JSON Lines, and verified from the server
// or offline from such a file against the published JWK Set.

// chainPage is a page of GET …/audit/chain.
type chainPage struct {
	TenantID string                 `json:"tenant_id"`
	HeadSeq  int64                  `json:"head_seq"`
	HeadHash string                 `json:"head_hash"`
	Items    []auditchain.WireEntry `json:"items"`
	Next     *int64                 `json:"next"`
}

// checkpointPage is a page of GET …/audit/checkpoints.
type checkpointPage struct {
	Items []auditchain.WireCheckpoint `json:"items"`
	Next  *int64                      `json:"next"`
}

// auditLines reads the tenant's chain from the server as an export's
// lines: the header (with the chain head when reading began), the
// checkpoints up to the head, the entries outside the chain, then the
// chained entries up to the head, each passed to line in that order.
func (c *cli) auditLines(ctx context.Context, line func(v any) error) error {
	base := c.tenantPath("/audit/")
	var first chainPage
	if err := c.call(ctx, http.MethodGet, base+"chain?limit=1000&after=0", nil, &first); err != nil {
		return err
	}
	head := first.HeadSeq
	if err := line(auditchain.WireHeader{Type: auditchain.LineHeader, Version: auditchain.Version, TenantID: first.TenantID,
		Tenant: c.tenant, ExportedAt: time.Now().UTC().Format(auditchain.TimeFormat), HeadSeq: head, HeadHash: first.HeadHash}); err != nil {
		return err
	}
	for after := int64(0); ; {
		var p checkpointPage
		if err := c.call(ctx, http.MethodGet, base+"checkpoints?limit=1000&after="+strconv.FormatInt(after, 10), nil, &p); err != nil {
			return err
		}
		for _, cp := range p.Items {
			if cp.Seq > head {
				return nil // signed after reading began; the entries stop at head
			}
			if err := line(cp); err != nil {
				return err
			}
		}
		if p.Next == nil {
			break
		}
		after = *p.Next
	}
	for _, unchained := range []bool{true, false} {
		p, after := first, int64(0)
		for {
			if unchained || after > 0 {
				p = chainPage{}
				q := fmt.Sprintf("chain?limit=1000&after=%d&unchained=%t", after, unchained)
				if err := c.call(ctx, http.MethodGet, base+q, nil, &p); err != nil {
					return err
				}
			}
			for _, e := range p.Items {
				if !unchained && e.Seq > head {
					return nil
				}
				if err := line(e); err != nil {
					return err
				}
			}
			if p.Next == nil {
				break
			}
			after = *p.Next
		}
	}
	return nil
}

func (c *cli) auditExportCommand() *cobra.Command {
	var format, output string
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write a tenant's audit log with its hash chain and signed checkpoints (JSON Lines)",
		Long: `Write the tenant's audit entries with their hashes and the signed checkpoints of
their chain, one JSON object a line: a header (type audit_export: the tenant and
its chain head when the export began), the checkpoints, then the entries in chain
order. A SIEM can ingest it; an auditor verifies it offline with
` + "`agentowl audit verify --from FILE --jwks JWKS`" + ` and the server's published keys.
Verify the file as written: re-encoding its lines may change what the hashes cover.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "jsonl" {
				return fmt.Errorf("--format %q: only jsonl is supported", format)
			}
			w, closeOut := c.stdout, func() error { return nil }
			if output != "" && output != "-" {
				f, err := os.OpenFile(filepath.Clean(output), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
				if err != nil {
					return err
				}
				w, closeOut = f, f.Close
			}
			bw := bufio.NewWriter(w)
			err := c.auditLines(cmd.Context(), func(v any) error {
				b, err := json.Marshal(v)
				if err == nil {
					bw.Write(b)
					err = bw.WriteByte('\n')
				}
				return err
			})
			return errors.Join(err, bw.Flush(), closeOut())
		},
	}
	c.tenantFlag(cmd)
	cmd.Flags().StringVar(&format, "format", "jsonl", "output format: jsonl")
	cmd.Flags().StringVarP(&output, "output", "o", "-", "write to this file (mode 0600) instead of stdout")
	return cmd
}

func (c *cli) auditVerifyCommand() *cobra.Command {
	var from, jwks string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Recompute a tenant's audit hash chain and check its signed checkpoints",
		Long: `Recompute the tenant's audit hash chain, from the server or offline from an export
(--from FILE, - for stdin), check every signed checkpoint against the JWK Set
(--jwks: a URL or a file; by default the server's /.well-known/agentowl/jwks.json,
required with --from), and name the first entry that was altered, inserted or
deleted, and any reordered pair. Exits non-zero when anything is found.

Entries after the newest checkpoint are protected by the chain alone: a tail
removed after it shows only against the chain head the server (or the export's
header) reports, so someone who can also rewrite that head can remove it
unnoticed. Keep exports, or compare with the newest checkpoint you have seen.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if jwks == "" {
				if from != "" {
					return errors.New("--jwks is required with --from: the JWK Set the checkpoints were signed with")
				}
				base, _, err := c.server()
				if err != nil {
					return err
				}
				jwks = base + "/.well-known/agentowl/jwks.json"
			}
			keys, err := loadJWKS(ctx, jwks)
			if err != nil {
				return err
			}
			var rep *auditchain.Report
			if from != "" {
				rep, err = verifyExport(ctx, from, c.stdinOr(cmd), keys)
			} else {
				rep, err = c.verifyFromServer(ctx, keys)
			}
			if err != nil {
				return err
			}
			if err := c.emit(rep, func(w io.Writer) { printChainReport(w, rep) }); err != nil {
				return err
			}
			if !rep.OK() {
				return fmt.Errorf("the audit chain of tenant %s does not verify: %d finding(s)", rep.TenantID, len(rep.Findings))
			}
			return nil
		},
	}
	c.tenantFlag(cmd)
	cmd.Flags().StringVar(&from, "from", "", "verify this export file (- for stdin) instead of the server's log")
	cmd.Flags().StringVar(&jwks, "jwks", "", "the JWK Set: a URL or a file (default: the server's)")
	return cmd
}

func (c *cli) stdinOr(cmd *cobra.Command) io.Reader { return cmd.InOrStdin() }

// verifyFromServer streams the server's chain into a verifier.
func (c *cli) verifyFromServer(ctx context.Context, keys attest.KeySet) (*auditchain.Report, error) {
	var v *auditchain.Verifier
	var head *auditchain.Head
	err := c.auditLines(ctx, func(x any) error {
		switch l := x.(type) {
		case auditchain.WireHeader:
			v = auditchain.NewVerifier(l.TenantID)
			head = wireHead(&l)
		case auditchain.WireCheckpoint:
			v.AddCheckpoint(ctx, l.JWS, keys)
		case auditchain.WireEntry:
			e, err := auditchain.FromWire(head.TenantID, &l)
			if err != nil {
				return err
			}
			v.Add(e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return v.Finish(head), nil
}

func wireHead(h *auditchain.WireHeader) *auditchain.Head {
	hash, _ := hex.DecodeString(h.HeadHash)
	return &auditchain.Head{TenantID: h.TenantID, Seq: h.HeadSeq, Hash: hash}
}

// verifyExport verifies an export file (or stdin for "-"): its header
// first, every checkpoint, then its entries in the file's order.
func verifyExport(ctx context.Context, from string, stdin io.Reader, keys attest.KeySet) (*auditchain.Report, error) {
	var data []byte
	var err error
	if from == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(filepath.Clean(from))
	}
	if err != nil {
		return nil, err
	}
	var v *auditchain.Verifier
	var head *auditchain.Head
	// Two passes: the checkpoints (and the header) before any entry, in
	// whatever order the file holds them.
	for pass := range 2 {
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for n := 1; sc.Scan(); n++ {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue
			}
			var kind struct {
				Type string `json:"type"`
			}
			if err := json.Unmarshal(line, &kind); err != nil {
				return nil, fmt.Errorf("%s:%d: not a JSON object: %v", from, n, err)
			}
			switch {
			case pass == 0 && kind.Type == auditchain.LineHeader:
				var h auditchain.WireHeader
				if err := json.Unmarshal(line, &h); err != nil || h.TenantID == "" || v != nil {
					return nil, fmt.Errorf("%s:%d: a header line that is not one export's header", from, n)
				}
				v, head = auditchain.NewVerifier(h.TenantID), wireHead(&h)
			case pass == 0 && kind.Type == auditchain.LineCheckpoint:
				var cp auditchain.WireCheckpoint
				if err := json.Unmarshal(line, &cp); err != nil {
					return nil, fmt.Errorf("%s:%d: %v", from, n, err)
				}
				if v == nil {
					return nil, fmt.Errorf("%s:%d: a checkpoint before the export's header", from, n)
				}
				v.AddCheckpoint(ctx, cp.JWS, keys)
			case pass == 1 && kind.Type == auditchain.LineEntry:
				var w auditchain.WireEntry
				if err := json.Unmarshal(line, &w); err != nil {
					return nil, fmt.Errorf("%s:%d: %v", from, n, err)
				}
				e, err := auditchain.FromWire(head.TenantID, &w)
				if err != nil {
					return nil, fmt.Errorf("%s:%d: %v", from, n, err)
				}
				v.Add(e)
			case kind.Type != auditchain.LineHeader && kind.Type != auditchain.LineCheckpoint && kind.Type != auditchain.LineEntry:
				return nil, fmt.Errorf("%s:%d: unknown line type %q", from, n, kind.Type)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, err
		}
		if v == nil {
			return nil, fmt.Errorf("%s: no export header (a line of type %s)", from, auditchain.LineHeader)
		}
	}
	return v.Finish(head), nil
}

func printChainReport(w io.Writer, r *auditchain.Report) {
	if r.Entries == 0 && r.Purged == 0 {
		fmt.Fprintf(w, "Tenant %s: no audit entries.\n", r.TenantID)
	} else {
		fmt.Fprintf(w, "Tenant %s: %d entries, seq %d to %d", r.TenantID, r.Entries, r.FirstSeq, r.LastSeq)
		if r.Purged > 0 {
			fmt.Fprintf(w, " (1 to %d removed by retention, anchored at a signed checkpoint)", r.Purged)
		}
		fmt.Fprintln(w, ".")
	}
	fmt.Fprintf(w, "Checkpoints: %d signed and verified, %d match the chain", r.Checkpoints, r.Matched)
	if r.LastCheckpointAt != nil {
		fmt.Fprintf(w, "; the newest covers seq %d, signed %s", r.LastCheckpointSeq, r.LastCheckpointAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(w, ".")
	if r.Uncovered > 0 {
		fmt.Fprintf(w, "%d entries after the newest checkpoint are protected by the chain alone.\n", r.Uncovered)
	}
	if r.OK() {
		fmt.Fprintln(w, "OK: the chain verifies.")
		return
	}
	fmt.Fprintf(w, "FAILED: %s\n", r.Findings[0].Message)
	rows := make([][]string, 0, len(r.Findings))
	for _, f := range r.Findings {
		entry := "-"
		if f.Seq != 0 || f.ID != 0 {
			entry = fmt.Sprintf("seq %d id %d", f.Seq, f.ID)
		}
		rows = append(rows, []string{string(f.Kind), entry, strings.ReplaceAll(f.Message, "\t", " ")})
	}
	table(w, "KIND\tENTRY\tFINDING", rows)
}
