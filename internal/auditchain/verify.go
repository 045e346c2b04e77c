package auditchain

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/agentowl/agentowl/attest"
)

// Kind is what a finding says happened.
type Kind string

// Finding kinds.
const (
	// Altered: an entry's content no longer matches its hash, or its hash
	// no longer matches what the next entry (or a checkpoint) chains to.
	Altered Kind = "altered"
	// Inserted: an entry that was not part of the chain as written.
	Inserted Kind = "inserted"
	// Deleted: entries of the chain are missing.
	Deleted Kind = "deleted"
	// Reordered: two entries are in each other's place.
	Reordered Kind = "reordered"
	// Truncated: entries at the end of the chain are missing, as a signed
	// checkpoint or the chain head shows.
	Truncated Kind = "truncated"
	// Forged: a checkpoint whose signature does not verify.
	Forged Kind = "checkpoint"
)

// Finding is one thing verification found wrong.
type Finding struct {
	Kind Kind `json:"kind"`
	// Seq and ID name the entry (its seq as stored and its row ID); zero
	// when the finding is about entries that are gone.
	Seq int64 `json:"seq,omitempty"`
	ID  int64 `json:"id,omitempty"`
	// OtherSeq and OtherID name the other entry of a reordered pair.
	OtherSeq int64  `json:"other_seq,omitempty"`
	OtherID  int64  `json:"other_id,omitempty"`
	Message  string `json:"message"`
}

// Report is the outcome of a verification.
type Report struct {
	TenantID string `json:"tenant_id"`
	// Entries counts the chained entries read.
	Entries int `json:"entries"`
	// FirstSeq and LastSeq are the first and last entries' seq.
	FirstSeq int64 `json:"first_seq"`
	LastSeq  int64 `json:"last_seq"`
	// Purged counts the entries before the first one, which retention
	// removed: the first entry chains to a signed checkpoint of them.
	Purged int64 `json:"purged"`
	// Checkpoints counts the checkpoints whose signature verified;
	// Matched those that also matched the recomputed chain.
	Checkpoints int `json:"checkpoints"`
	Matched     int `json:"checkpoints_matched"`
	// LastCheckpointSeq is the newest checkpoint that matched, and
	// LastCheckpointAt when it was signed.
	LastCheckpointSeq int64      `json:"last_checkpoint_seq"`
	LastCheckpointAt  *time.Time `json:"last_checkpoint_at,omitempty"`
	// Uncovered counts the entries after the newest matched checkpoint:
	// the chain alone protects them (a truncated tail among them shows
	// only against the chain head).
	Uncovered int64     `json:"uncovered"`
	Findings  []Finding `json:"findings"`
}

// OK reports whether nothing was found wrong.
func (r *Report) OK() bool { return len(r.Findings) == 0 }

// MaxFindings bounds the findings one report lists.
const MaxFindings = 100

// Verifier recomputes one tenant's chain from its entries, given in seq
// order (entries outside the chain, Seq 0, anywhere), after every
// checkpoint. It keeps two entries in memory, so an export of any size
// verifies in constant memory.
type Verifier struct {
	rep     Report
	cps     map[int64]*Checkpoint // verified, by seq
	started bool
	// h is the hash of the last accepted entry, hPrev of the one before.
	h, hPrev []byte
	last     *Entry
	lastSeq  int64 // the last accepted entry's seq as stored
	// offset is how far the stored seqs were renumbered from the seqs the
	// entries were written with (an insertion or deletion that renumbered
	// the entries after it).
	offset  int64
	pending *Entry
	// cpDue is the finding of a checkpoint that did not match the last
	// accepted entry, held until the next entry shows whether that entry
	// was inserted (and the checkpoint then belongs to the next).
	cpDue *Finding
}

// NewVerifier starts a verification of tenantID's chain.
func NewVerifier(tenantID string) *Verifier {
	return &Verifier{rep: Report{TenantID: tenantID, Findings: []Finding{}}, cps: map[int64]*Checkpoint{}}
}

func (v *Verifier) find(f Finding) {
	if len(v.rep.Findings) < MaxFindings {
		v.rep.Findings = append(v.rep.Findings, f)
	}
}

func (v *Verifier) findf(k Kind, e *Entry, format string, args ...any) {
	f := Finding{Kind: k, Message: fmt.Sprintf(format, args...)}
	if e != nil {
		f.Seq, f.ID = e.Seq, e.ID
	}
	v.find(f)
}

// AddCheckpoint verifies a signed checkpoint with keys; one that does not
// verify is a finding and plays no further part.
func (v *Verifier) AddCheckpoint(ctx context.Context, jws string, keys attest.KeySet) {
	c, err := VerifyCheckpoint(ctx, jws, keys, v.rep.TenantID)
	if err != nil {
		v.find(Finding{Kind: Forged, Message: err.Error()})
		return
	}
	if old, ok := v.cps[c.Seq]; ok {
		if old.Head != c.Head {
			v.find(Finding{Kind: Forged, Message: fmt.Sprintf("two signed checkpoints of seq %d name different heads", c.Seq)})
		}
		return
	}
	v.cps[c.Seq] = c
	v.rep.Checkpoints++
}

// Add reads the next entry.
func (v *Verifier) Add(e *Entry) {
	if e.Seq == 0 {
		v.findf(Inserted, e, "entry id %d (%s %s at %s) is not in the chain: it was written past it", e.ID, e.Action,
			e.Target, e.At.UTC().Format(time.RFC3339))
		return
	}
	if v.pending == nil {
		v.pending = e
		return
	}
	if v.process(v.pending, e) {
		v.pending = nil
		return
	}
	v.pending = e
}

func eq(a, b []byte) bool { return bytes.Equal(a, b) }

func name(e *Entry) string {
	if e == nil {
		return "the start of the log"
	}
	return fmt.Sprintf("entry seq %d (id %d)", e.Seq, e.ID)
}

// start anchors the chain before its first entry e: the zero hash before
// seq 1, otherwise the signed checkpoint of seq-1 that retention kept.
func (v *Verifier) start(e *Entry) {
	v.started = true
	v.rep.FirstSeq = e.Seq
	v.lastSeq = e.Seq - 1
	switch cp, ok := v.cps[e.Seq-1]; {
	case e.Seq == 1:
		v.h = Zero
	case ok:
		v.h, _ = hex.DecodeString(cp.Head)
		v.rep.Purged = e.Seq - 1
		at := cp.At
		v.rep.Matched++
		v.rep.LastCheckpointSeq, v.rep.LastCheckpointAt = cp.Seq, &at
	default:
		v.h = e.PrevHash
		v.findf(Deleted, e, "entries seq 1 to %d are missing and no signed checkpoint covers seq %d (retention keeps one): they were deleted",
			e.Seq-1, e.Seq-1)
	}
}

// process checks entry e, the next one f (nil at the end) at hand; it
// reports whether it consumed f too.
func (v *Verifier) process(e, f *Entry) bool {
	if !v.started {
		v.start(e)
	}
	if e.Seq <= v.lastSeq {
		v.findf(Reordered, e, "entry seq %d (id %d) comes after seq %d", e.Seq, e.ID, v.lastSeq)
		return false
	}
	due := v.cpDue
	v.cpDue = nil
	defer func() {
		if due != nil {
			v.find(*due)
		}
	}()
	if e.Seq > v.lastSeq+1 {
		v.findf(Deleted, e, "entries seq %d to %d are missing between %s and entry seq %d (id %d): they were deleted",
			v.lastSeq+1, e.Seq-1, name(v.last), e.Seq, e.ID)
		if !eq(e.Compute(e.PrevHash, e.Seq-v.offset), e.Hash) {
			v.findf(Altered, e, "entry seq %d (id %d) was altered: its content does not match its hash", e.Seq, e.ID)
		}
		v.accept(e)
		return false
	}
	orig := e.Seq - v.offset
	self := eq(e.Compute(e.PrevHash, orig), e.Hash)
	link := eq(e.PrevHash, v.h)
	switch {
	case self && link:
		v.accept(e)
		return false
	case f != nil && v.swapped(e, f, orig):
		return true
	case !link && v.last != nil && eq(e.PrevHash, v.hPrev):
		// e chains to the entry before the last one: the last one was
		// not in the chain as written, and a checkpoint that did not match
		// it belongs to e.
		due = nil
		msg := fmt.Sprintf("entry seq %d (id %d) was inserted: %s chains to the entry before it", v.last.Seq, v.last.ID, name(e))
		if !self && eq(e.Compute(e.PrevHash, orig-1), e.Hash) {
			v.offset++
			orig--
			self = true
			msg += ", and the entries after it were renumbered"
		}
		v.findf(Inserted, v.last, "%s", msg)
		if !self {
			v.findf(Altered, e, "entry seq %d (id %d) was altered: its content does not match its hash", e.Seq, e.ID)
		}
		v.h = v.hPrev
		v.accept(e)
		return false
	case !self && !link && eq(e.Compute(e.PrevHash, orig+1), e.Hash):
		v.offset--
		v.findf(Deleted, e, "an entry between %s and entry seq %d (id %d) was deleted and the entries after it renumbered",
			name(v.last), e.Seq, e.ID)
	case !self:
		v.findf(Altered, e, "entry seq %d (id %d) was altered: its content does not match its hash", e.Seq, e.ID)
	default: // its own hash holds, its link does not
		if v.last == nil {
			v.findf(Altered, e, "entry seq %d (id %d) does not chain to the signed checkpoint of seq %d: it was altered", e.Seq, e.ID, e.Seq-1)
		} else {
			v.findf(Altered, v.last, "%s was altered: its hash is not what entry seq %d (id %d) chains to (its hash was rewritten, or entries between them deleted)",
				name(v.last), e.Seq, e.ID)
		}
	}
	v.accept(e)
	return false
}

// swapped reports whether e and f are a pair in each other's place: the
// rows' seqs exchanged (f was written at orig chained to the last entry,
// e after f), or their contents exchanged under the chain's columns; it
// then accepts both.
func (v *Verifier) swapped(e, f *Entry, orig int64) bool {
	if f.Seq != e.Seq+1 {
		return false
	}
	var heads [2][]byte
	switch {
	case eq(f.PrevHash, v.h) && eq(f.Compute(v.h, orig), f.Hash) && eq(e.PrevHash, f.Hash) && eq(e.Compute(f.Hash, orig+1), e.Hash):
		heads = [2][]byte{f.Hash, e.Hash}
	case eq(f.Compute(v.h, orig), e.Hash) && eq(e.Compute(e.Hash, orig+1), f.Hash):
		heads = [2][]byte{e.Hash, f.Hash}
	default:
		return false
	}
	v.find(Finding{Kind: Reordered, Seq: e.Seq, ID: e.ID, OtherSeq: f.Seq, OtherID: f.ID,
		Message: fmt.Sprintf("entries seq %d (id %d) and seq %d (id %d) were reordered: each is in the other's place", e.Seq, e.ID, f.Seq, f.ID)})
	v.acceptHash(e, heads[0])
	v.acceptHash(f, heads[1])
	return true
}

func (v *Verifier) accept(e *Entry) { v.acceptHash(e, e.Hash) }

// acceptHash takes e as the chain's next entry, whose hash in the chain as
// written is h, and checks a checkpoint of its seq.
func (v *Verifier) acceptHash(e *Entry, h []byte) {
	v.hPrev, v.h = v.h, h
	v.last, v.lastSeq = e, e.Seq
	v.rep.Entries++
	v.rep.LastSeq = e.Seq
	orig := e.Seq - v.offset
	cp, ok := v.cps[orig]
	if !ok {
		return
	}
	if hex.EncodeToString(h) == cp.Head {
		v.rep.Matched++
		if orig > v.rep.LastCheckpointSeq {
			at := cp.At
			v.rep.LastCheckpointSeq, v.rep.LastCheckpointAt = orig, &at
		}
		return
	}
	v.cpDue = &Finding{Kind: Altered, Seq: e.Seq, ID: e.ID, Message: fmt.Sprintf(
		"the checkpoint of seq %d signed at %s does not match the chain at %s: entries up to it were altered, inserted or deleted, and their hashes rewritten",
		orig, cp.At.UTC().Format(time.RFC3339), name(e))}
}

// Finish ends the verification. head, when known, is the chain head the
// server reports (an export's header): it shows a truncated or extended
// tail that no checkpoint covers yet.
func (v *Verifier) Finish(head *Head) *Report {
	if v.pending != nil {
		v.process(v.pending, nil)
		v.pending = nil
	}
	if v.cpDue != nil {
		v.find(*v.cpDue)
		v.cpDue = nil
	}
	lastOrig := v.lastSeq - v.offset
	var beyond []int64
	for s := range v.cps {
		if s > lastOrig {
			beyond = append(beyond, s)
		}
	}
	slices.Sort(beyond)
	switch {
	case !v.started && len(beyond) > 0:
		top := v.cps[beyond[len(beyond)-1]]
		hh, _ := hex.DecodeString(top.Head)
		if head != nil && head.Seq == top.Seq && eq(head.Hash, hh) {
			v.rep.Purged = top.Seq // retention removed every entry
			v.rep.LastCheckpointSeq, v.rep.LastCheckpointAt = top.Seq, &top.At
			break
		}
		v.find(Finding{Kind: Truncated, Message: fmt.Sprintf(
			"the log holds no entries, but a checkpoint signed at %s covers entries up to seq %d: they were deleted",
			top.At.UTC().Format(time.RFC3339), top.Seq)})
	case len(beyond) > 0:
		top := v.cps[beyond[len(beyond)-1]]
		v.find(Finding{Kind: Truncated, Message: fmt.Sprintf(
			"the log ends at seq %d, but a checkpoint signed at %s covers entries up to seq %d: entries seq %d to %d were deleted",
			v.lastSeq, top.At.UTC().Format(time.RFC3339), top.Seq, v.lastSeq+1, top.Seq+v.offset)})
	}
	if head != nil && v.started {
		switch {
		case head.Seq > lastOrig:
			v.find(Finding{Kind: Truncated, Message: fmt.Sprintf(
				"the log ends at seq %d, but the chain head is at seq %d: entries seq %d to %d were deleted",
				v.lastSeq, head.Seq, v.lastSeq+1, head.Seq+v.offset)})
		case head.Seq < lastOrig:
			v.find(Finding{Kind: Inserted, Seq: head.Seq + 1 + v.offset, Message: fmt.Sprintf(
				"entries seq %d to %d lie past the chain head (seq %d): they were written past the chain",
				head.Seq+1+v.offset, v.lastSeq, head.Seq)})
		case !eq(head.Hash, v.h):
			v.findf(Altered, v.last, "%s is not the chain head the server holds: it was altered", name(v.last))
		}
	}
	if v.started {
		v.rep.Uncovered = lastOrig - v.rep.LastCheckpointSeq
	}
	return &v.rep
}
