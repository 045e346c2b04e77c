// Package auditchain is the pure logic of the tamper-evident audit log
// (docs/attestations.md, "The audit chain"): the canonical form each audit
// entry's hash covers, the signed checkpoints of a tenant's chain head, the
// export format, and the verifier that recomputes a chain and names the
// first entry that was altered, inserted, deleted or reordered.
//
// Each tenant's entries form one chain, numbered 1, 2, 3, … (seq). Entry n
// stores
//
//	hash(n) = SHA-256( "agentowl.audit.v1" 0x00
//	                   || hash(n-1)          32 bytes; 32 zero bytes for n = 1
//	                   || uint64(n)          8 bytes, big-endian
//	                   || str(tenant_id) || int64(at) || str(actor) || str(action)
//	                   || str(target) || str(request_id) || str(details) )
//
// where at is the entry's time in microseconds since the Unix epoch (8
// bytes, big-endian, two's complement), str(s) is the length of s's UTF-8
// bytes as a 4-byte big-endian integer followed by those bytes, and details
// is the entry's details exactly as stored: a JSON text. The stores compute
// the same function in SQL (agentowl_audit_hash, migration 00026), so an
// append costs no round trip of its own; this package is the reference
// that verification uses.
//
// The package stands on the standard library and on attest's key sets
// (the published JWK Set of the server's attestation keys).
package auditchain

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// HashSize is the size of an entry hash.
const HashSize = sha256.Size

// Domain is the prefix of every entry's canonical form: it names the
// construction and its version, so a hash of this chain is never a hash of
// anything else.
const Domain = "agentowl.audit.v1\x00"

// Zero is the predecessor hash of a chain's first entry.
var Zero = make([]byte, HashSize)

// Entry is one audit entry as the chain sees it.
type Entry struct {
	// ID is the row's key in the store; it names the entry to a reader,
	// the chain does not cover it.
	ID       int64
	TenantID string
	// Seq is the entry's place in its tenant's chain, from 1; 0 for an
	// entry that is not in the chain (one written past the chain: it was
	// inserted).
	Seq       int64
	At        time.Time // kept to the microsecond
	Actor     string
	Action    string
	Target    string
	RequestID string
	// Details is the entry's details as stored: a JSON text.
	Details []byte
	// PrevHash is the hash the entry chains to; Hash its own, as stored.
	PrevHash, Hash []byte
}

// Compute returns the hash of the entry's canonical form at seq, chained
// to prev: what Hash must hold when nothing was changed.
func (e *Entry) Compute(prev []byte, seq int64) []byte {
	return Sum(prev, seq, e.TenantID, e.At.UnixMicro(), e.Actor, e.Action, e.Target, e.RequestID, e.Details)
}

// Sum is the canonical hash of an entry's fields (the package comment).
func Sum(prev []byte, seq int64, tenantID string, atMicros int64, actor, action, target, requestID string, details []byte) []byte {
	h := sha256.New()
	var n [8]byte
	h.Write([]byte(Domain))
	h.Write(prev)
	binary.BigEndian.PutUint64(n[:], uint64(seq))
	h.Write(n[:])
	str := func(b []byte) {
		var l [4]byte
		binary.BigEndian.PutUint32(l[:], uint32(len(b)))
		h.Write(l[:])
		h.Write(b)
	}
	str([]byte(tenantID))
	binary.BigEndian.PutUint64(n[:], uint64(atMicros))
	h.Write(n[:])
	str([]byte(actor))
	str([]byte(action))
	str([]byte(target))
	str([]byte(requestID))
	str(details)
	return h.Sum(nil)
}

// Head is a tenant's chain head: the newest entry's seq and hash.
type Head struct {
	TenantID string
	Seq      int64
	Hash     []byte
}

// ---- the export format (JSON Lines), shared by the operator API and the CLI

// Line types of an export.
const (
	LineHeader     = "audit_export"
	LineCheckpoint = "checkpoint"
	LineEntry      = "entry"
)

// Version is the export format's version.
const Version = 1

// TimeFormat is how an export writes times: RFC 3339 in UTC to the
// microsecond, the precision the chain covers.
const TimeFormat = "2006-01-02T15:04:05.000000Z07:00"

// WireHeader is an export's first line: whose chain, and its head when
// the export was taken (the server's word, not signed: compared with the
// entries it catches a truncated tail the checkpoints do not cover).
type WireHeader struct {
	Type       string `json:"type"`
	Version    int    `json:"version"`
	TenantID   string `json:"tenant_id"`
	Tenant     string `json:"tenant,omitempty"`
	ExportedAt string `json:"exported_at"`
	HeadSeq    int64  `json:"head_seq"`
	HeadHash   string `json:"head_hash,omitempty"`
}

// WireCheckpoint is a signed checkpoint.
type WireCheckpoint struct {
	Type string `json:"type"`
	Seq  int64  `json:"seq"`
	Head string `json:"head"`
	At   string `json:"at"`
	// JWS is the signed checkpoint (CheckpointPayload); the other fields
	// repeat its payload for readers and are not trusted.
	JWS string `json:"jws"`
}

// WireEntry is one entry with its chain fields.
type WireEntry struct {
	Type string `json:"type"`
	ID   int64  `json:"id"`
	// Seq is 0 for an entry outside the chain.
	Seq       int64  `json:"seq"`
	At        string `json:"at"`
	Actor     string `json:"actor"`
	Action    string `json:"action"`
	Target    string `json:"target"`
	RequestID string `json:"request_id"`
	// Details is the entry's details as stored, when that JSON text
	// survives encoding unchanged (what the server writes always does);
	// otherwise DetailsText holds the stored text as it is.
	Details     json.RawMessage `json:"details,omitempty"`
	DetailsText *string         `json:"details_text,omitempty"`
	PrevHash    string          `json:"prev_hash"`
	Hash        string          `json:"hash"`
}

// stable reports whether encoding/json writes the JSON text d unchanged
// as a json.RawMessage (compact, HTML characters escaped), so a reader of
// the line gets d's bytes back.
func stable(d []byte) bool {
	if !json.Valid(d) {
		return false
	}
	var c, esc bytes.Buffer
	if json.Compact(&c, d) != nil {
		return false
	}
	json.HTMLEscape(&esc, c.Bytes())
	return bytes.Equal(esc.Bytes(), d)
}

// ToWire returns e as a line of an export.
func ToWire(e *Entry) WireEntry {
	w := WireEntry{Type: LineEntry, ID: e.ID, Seq: e.Seq, At: e.At.UTC().Format(TimeFormat), Actor: e.Actor,
		Action: e.Action, Target: e.Target, RequestID: e.RequestID,
		PrevHash: hex.EncodeToString(e.PrevHash), Hash: hex.EncodeToString(e.Hash)}
	if stable(e.Details) {
		w.Details = append(json.RawMessage(nil), e.Details...)
	} else {
		s := string(e.Details)
		w.DetailsText = &s
	}
	return w
}

// FromWire reads an entry of an export for tenantID.
func FromWire(tenantID string, w *WireEntry) (*Entry, error) {
	at, err := time.Parse(time.RFC3339Nano, w.At)
	if err != nil {
		return nil, fmt.Errorf("entry %d: at: %w", w.ID, err)
	}
	prev, err1 := hex.DecodeString(w.PrevHash)
	h, err2 := hex.DecodeString(w.Hash)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("entry %d: hashes: %w", w.ID, err)
	}
	details := []byte(w.Details)
	if w.DetailsText != nil {
		details = []byte(*w.DetailsText)
	}
	return &Entry{ID: w.ID, TenantID: tenantID, Seq: w.Seq, At: at, Actor: w.Actor, Action: w.Action, Target: w.Target,
		RequestID: w.RequestID, Details: details, PrevHash: prev, Hash: h}, nil
}
