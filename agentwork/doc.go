// Package agentwork is the agent-work protocol, version agent-work.v1
// (docs/agent-work.md and docs/attention.md), in one place: the documents
// AgentOwl and agent runtimes exchange, their canonical JSON, and action
// digests.
//
// The documents are the handoff envelope an endpoint receives (Handoff,
// with its Event and, for agent-work endpoints, its Work block), the
// callback a runtime reports with (Callback, with Result and, for
// needs_input, Request and Action), the decision AgentOwl pushes to the
// runtime's decision URL and lists for recovery (Decision), and the
// runtime's answer to that push (Acceptance).
//
// Canonical JSON (Canonicalize, CanonicalJSON) is how two bodies that
// mean the same JSON compare equal: object keys sorted by the byte order
// of their UTF-8 encoding, no insignificant whitespace, no HTML escaping,
// strings re-encoded by encoding/json (escapes such as \u00e9 become the
// character; control characters, U+2028 and U+2029 stay escaped; invalid
// UTF-8 becomes U+FFFD), and numbers kept exactly as written (1e3, 1.0 and
// -0 are not rewritten to 1000, 1 and 0). It is not RFC 8785. AgentOwl
// compares callbacks in this form (a retry that re-serializes is still a
// duplicate) and runtimes compute action digests over it (ActionDigest),
// so both sides must produce the same bytes: the golden vectors in
// testdata/ pin them, and the server's tests and the workclient SDK's
// tests check the same files (see package agentworktest).
//
// The package depends on the standard library only. The workclient SDK
// re-exports its types; the server builds and parses its documents with
// it.
package agentwork
