package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	apispec "github.com/agentowl/agentowl/api"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Contract validates answers against an OpenAPI document of AAP v1 (the
// AAP repository's openapi.yaml, or a provider's own document that
// contains it, such as AgentOwl's api/openapi.yaml).
type Contract struct {
	Source string
	doc    *openapi3.T
	router routers.Router
}

// LoadContract reads and validates an OpenAPI document.
func LoadContract(path string) (*Contract, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("OpenAPI document: %w", err)
	}
	return ParseContract(path, data)
}

// ParseContract parses an OpenAPI document; source names it in messages.
func ParseContract(source string, data []byte) (*Contract, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("OpenAPI document %s: %w", source, err)
	}
	// The document is not validated as a whole: a provider's own document
	// may hold parts the validator dislikes that have nothing to do with
	// AAP. The AAP operations must be there.
	for _, p := range []string{"/v1/requests", "/v1/requests/{id}", "/v1/instances", "/v1/instances/{id}"} {
		if doc.Paths.Find(p) == nil {
			return nil, fmt.Errorf("OpenAPI document %s does not describe %s: it is not the AAP v1 contract", source, p)
		}
	}
	// The provider's base URL may carry a path; exchanges are validated
	// on their path relative to it.
	doc.Servers = openapi3.Servers{{URL: "/"}}
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("OpenAPI document %s: %w", source, err)
	}
	return &Contract{Source: source, doc: doc, router: r}, nil
}

// FindContract looks for the AAP contract: path if set, else the
// environment variable AAP_OPENAPI, else api/openapi.yaml in the working
// directory or one of its parents, else the copy the binary carries
// (package api: AgentOwl's document, whose /v1 part is the AAP contract).
func FindContract(path string) (*Contract, error) {
	if path == "" {
		path = os.Getenv("AAP_OPENAPI")
	}
	if path != "" {
		return LoadContract(path)
	}
	dir, err := os.Getwd()
	if err != nil {
		return ParseContract("the built-in api/openapi.yaml", apispec.OpenAPI)
	}
	for {
		p := filepath.Join(dir, "api", "openapi.yaml")
		if _, err := os.Stat(p); err == nil {
			return LoadContract(p)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ParseContract("the built-in api/openapi.yaml", apispec.OpenAPI)
		}
		dir = parent
	}
}

func validationOptions() *openapi3filter.Options {
	return &openapi3filter.Options{
		IncludeResponseStatus: true,
		MultiError:            true,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{
			openapi3.WithStringFormatValidator("uuid", openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC9562)),
		},
	}
}

// ValidateExchange checks one answer of the provider: its status is one
// the operation documents, its body and headers match, and every answer
// carries X-Request-ID (equal to error.request_id on errors).
func (c *Contract) ValidateExchange(x *Exchange) error {
	req, err := http.NewRequest(x.Method, "http://provider"+x.Path, bytes.NewReader(x.ReqBody))
	if err != nil {
		return err
	}
	req.Header = x.ReqHeader.Clone()
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("no operation of the contract matches %s %s: %v", x.Method, x.Path, err)
	}
	var errs []error
	rid := x.RespHeader.Get("X-Request-ID")
	if rid == "" {
		errs = append(errs, errors.New("no X-Request-ID header (every answer of the provider API carries one)"))
	}
	if x.Status >= 400 {
		var e struct {
			Error struct {
				RequestID string `json:"request_id"`
			} `json:"error"`
		}
		if json.Unmarshal(x.RespBody, &e) == nil && e.Error.RequestID != "" && rid != "" && e.Error.RequestID != rid {
			errs = append(errs, fmt.Errorf("error.request_id %q differs from X-Request-ID %q", e.Error.RequestID, rid))
		}
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 x.Status,
		Header:                 x.RespHeader,
		Options:                validationOptions(),
	}
	in.SetBodyBytes(x.RespBody)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		errs = append(errs, fmt.Errorf("%s: %v", route.Operation.OperationID, err))
	}
	return errors.Join(errs...)
}

// ValidateSchema checks a JSON document against a schema of the
// contract's components, such as RequestResolvedEvent.
func (c *Contract) ValidateSchema(name string, data []byte) error {
	ref := c.doc.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("the contract %s has no schema %s", c.Source, name)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	v, err := normalizeNumbers(v)
	if err != nil {
		return err
	}
	opts := []openapi3.SchemaValidationOption{openapi3.MultiErrors(),
		openapi3.WithStringFormatValidator("uuid", openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC9562))}
	return ref.Value.VisitJSON(v, opts...)
}

// normalizeNumbers turns json.Number into float64, as the schema
// validator expects.
func normalizeNumbers(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		return x.Float64()
	case map[string]any:
		for k, e := range x {
			n, err := normalizeNumbers(e)
			if err != nil {
				return nil, err
			}
			x[k] = n
		}
	case []any:
		for i, e := range x {
			n, err := normalizeNumbers(e)
			if err != nil {
				return nil, err
			}
			x[i] = n
		}
	}
	return v, nil
}
