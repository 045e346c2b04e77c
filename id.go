package agentowl

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/hex"
	"strings"
	"time"
)

// NewID mints every ID the server gives a record, so that there is one
// rule for IDs (docs/architecture.md).
//
// Kind "" gives a random (version 4) UUID: the form the AAP contract uses
// for instances, requests and policies, and the outbox for webhook-id.
// Kind SortedUUID gives a version 7 UUID (RFC 9562: the creation time in
// milliseconds, then 74 random bits), which sorts by creation for the
// reason below: handoffs, the outbox's busiest writer, use it.
//
// Any other kind gives kind + "_" + 26 characters of [a-z2-7], such as
// work_…, conv_… or evt_…: the first 11 the creation time in milliseconds
// (base 26 in letters, so IDs sort by creation) and the other 15 random (75
// bits, base32). Sorting by creation makes each new row land at the end of
// its table's primary key and of the indexes keyed by it, where the rows
// committed with it also land, instead of on a random page of each: the
// single SQLite writer then writes a few pages per batch rather than a few
// per row (BENCHMARKS.md).
func NewID(kind string) string {
	switch kind {
	case "":
		return newUUID(0)
	case SortedUUID:
		return newUUID(time.Now().UnixMilli())
	}
	return newIDAt(kind, time.Now())
}

func newIDAt(kind string, t time.Time) string {
	var b [26]byte
	ms := uint64(max(t.UnixMilli(), 0))
	for i := 10; i >= 0; i-- {
		b[i] = byte('a' + ms%26)
		ms /= 26
	}
	var r [10]byte                                                                                // 80 bits; the first 75 are used
	rand.Read(r[:])                                                                               // never fails (crypto/rand.Read's contract)
	enc := strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(r[:])) // 16 characters
	copy(b[11:], enc)
	return kind + "_" + string(b[:])
}

// SortedUUID is the kind of NewID that mints a version 7 UUID.
const SortedUUID = "uuid7"

// newUUID is a UUID in its canonical text form: random (version 4) when ms
// is 0, else version 7 of unix time ms.
func newUUID(ms int64) string {
	var u [16]byte
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40 // version 4
	if ms > 0 {
		for i := 5; i >= 0; i-- {
			u[i] = byte(ms)
			ms >>= 8
		}
		u[6] = u[6]&0x0f | 0x70 // version 7
	}
	u[8] = u[8]&0x3f | 0x80 // variant 10
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return string(s[:])
}
