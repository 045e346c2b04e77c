package attachment

import (
	"mime"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameBytes caps a display name; longer names are shortened, keeping
// their extension.
const MaxNameBytes = 255

// maxHeaderValueBytes caps the declared type and Content-ID kept of a part.
const maxHeaderValueBytes = 255

// SafeName turns a sender's file name into a display name that is safe to
// show and to offer as a download name: valid UTF-8; no path separators (a
// name never climbs out of a directory), nor the characters Windows
// refuses in names; no control characters; no bidirectional or other
// invisible formatting characters (a right-to-left override makes
// "evil\u202Efdp.exe" look like "evilexe.pdf"); no leading or trailing dots
// and spaces; at most MaxNameBytes bytes. An empty result becomes
// "attachment-N" (N = position + 1). The name is only ever shown: keys and
// paths never use it.
func SafeName(name string, position int) string {
	name = strings.ToValidUTF8(name, "\uFFFD")
	name = strings.Map(func(r rune) rune {
		switch {
		case strings.ContainsRune(`/\:*?"<>|`, r):
			return '_'
		case unicode.IsSpace(r): // tabs, line breaks and the like become plain spaces
			return ' '
		case unicode.IsControl(r):
			return -1
		case r == '\u200D': // zero-width joiner: part of emoji sequences, harmless
			return r
		case unicode.Is(unicode.Cf, r): // format characters: bidi controls, zero-width spaces, BOM
			return -1
		}
		return r
	}, name)
	name = strings.Trim(name, ". ")
	if len(name) > MaxNameBytes {
		name = shorten(name, MaxNameBytes)
	}
	if name == "" {
		return "attachment-" + strconv.Itoa(position+1)
	}
	return name
}

// shorten cuts name to at most n bytes on a character boundary, keeping a
// short extension.
func shorten(name string, n int) string {
	ext := path.Ext(name)
	if len(ext) > 16 || len(ext) >= n {
		ext = ""
	}
	stem := strings.TrimSuffix(name, ext)
	stem = cut(stem, n-len(ext))
	return strings.Trim(stem, ". ") + ext
}

// cut returns the longest prefix of s of at most n bytes that ends on a
// character boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// headerValue keeps a header value the parser decoded (a declared type, a
// Content-ID) as printable text of at most maxHeaderValueBytes bytes.
func headerValue(v string) string {
	v = strings.ToValidUTF8(v, "\uFFFD")
	v = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, v)
	return cut(strings.TrimSpace(v), maxHeaderValueBytes)
}

// declaredType is a part's Content-Type as sent, in canonical form when it
// parses ("application/pdf", "text/plain; charset=utf-8"), otherwise as
// printable text, so a wrong or broken declaration stays visible next to
// the sniffed type. A part without one is text/plain (RFC 2045, 5.2).
func declaredType(v string) string {
	if strings.TrimSpace(v) == "" {
		return "text/plain"
	}
	if mt, params, err := mime.ParseMediaType(v); err == nil {
		if f := mime.FormatMediaType(mt, params); f != "" && len(f) <= maxHeaderValueBytes {
			return f
		}
		return cut(mt, maxHeaderValueBytes)
	}
	return headerValue(v)
}
