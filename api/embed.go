// Package api carries AgentOwl's OpenAPI document, whose /v1 part is the
// AAP v1 contract, so that tools built into the binary (the conformance
// kit) have it without a checkout.
package api

import _ "embed"

// OpenAPI is api/openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
