package agentowl

import "unicode/utf8"

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
