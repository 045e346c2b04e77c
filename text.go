package agentowl

import (
	"strings"
	"unicode/utf8"
)

// IsText reports whether s is text as every surface takes it: UTF-8 without
// U+0000. PostgreSQL refuses the others in text columns (SQLSTATE 22021)
// and SQLite keeps them, so they are refused where they enter, alike on
// both stores.
func IsText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// Clip returns s cut to at most n bytes at a character boundary, ending in
// "…" when it was cut: for showing text someone else wrote within a bound.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:max(n, 0)] + "…"
}
