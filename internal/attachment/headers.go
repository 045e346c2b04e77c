package attachment

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/agentowl/agentowl"
)

// Header is one response header of a download.
type Header struct{ Name, Value string }

// InertHeaders are the response headers that keep a retained file inert
// wherever it lands, for every surface that serves one (the API and the
// console): always application/octet-stream with nosniff and a sandboxing
// policy, offered as an attachment under its safe name, never cached, with
// its ETag and RFC 9530 digest of the whole file.
func InertHeaders(a *agentowl.Attachment) []Header {
	return []Header{
		{"Content-Type", "application/octet-stream"},
		{"X-Content-Type-Options", "nosniff"},
		{"Cache-Control", "private, no-store"},
		{"Content-Security-Policy", "default-src 'none'; sandbox"},
		{"Content-Disposition", ContentDisposition(SafeName(a.Name, a.Position))},
		{"ETag", ETag(a)},
		{"Repr-Digest", "sha-256=:" + base64.StdEncoding.EncodeToString(a.SHA256) + ":"},
	}
}

// ETag is a's entity tag: its SHA-256.
func ETag(a *agentowl.Attachment) string { return `"` + hex.EncodeToString(a.SHA256) + `"` }

// ContentDisposition offers a download as an attachment named name (already
// safe: SafeName): an ASCII fallback filename for old clients, and the
// exact name as an RFC 6266 / RFC 8187 filename*.
func ContentDisposition(name string) string {
	var ascii, ext strings.Builder
	for _, r := range name {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' || r == '%' {
			ascii.WriteByte('_')
		} else {
			ascii.WriteRune(r)
		}
	}
	for _, b := range []byte(name) {
		if isAttrChar(b) {
			ext.WriteByte(b)
		} else {
			fmt.Fprintf(&ext, "%%%02X", b)
		}
	}
	return `attachment; filename="` + ascii.String() + `"; filename*=UTF-8''` + ext.String()
}

// isAttrChar reports whether b may stand unencoded in an RFC 8187 value.
func isAttrChar(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || strings.IndexByte("!#$&+-.^_`|~", b) >= 0
}
