package agentowl

import (
	"strconv"
	"strings"
	"time"
)

// Cursor is a keyset position in a newest-first list: the rows after it
// are those created before At, or at At with an ID greater than ID.
type Cursor struct {
	At time.Time
	ID string
}

// String is the cursor as an opaque page token: "<unix micros>.<id>".
func (c Cursor) String() string { return strconv.FormatInt(c.At.UnixMicro(), 10) + "." + c.ID }

// ParseCursor reads a page token made by Cursor.String; ok is false for
// anything else.
func ParseCursor(s string) (c *Cursor, ok bool) {
	at, id, found := strings.Cut(s, ".")
	micros, err := strconv.ParseInt(at, 10, 64)
	if !found || err != nil || micros < 0 || id == "" || len(s) > 256 {
		return nil, false
	}
	return &Cursor{At: time.UnixMicro(micros).UTC(), ID: id}, true
}
