package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	apispec "github.com/agentowl/agentowl/api"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Contract validates answers against an OpenAPI document of AAP v1 (the
// AAP repository's openapi.yaml, or a provider's own document that
// contains it, such as AgentOwl's api/openapi.yaml).
type Contract struct {
	Source string
	doc    *openapi3.T
	router routers.Router
	bodies *bodySchemas // nil: every body goes through kin-openapi
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
	c := &Contract{Source: source, doc: doc, router: r}
	if doc.IsOpenAPI31OrLater() {
		c.bodies = newBodySchemas(doc)
	}
	return c, nil
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
	// Status, headers and media type through kin-openapi; a JSON body
	// against the schema compiled once for the contract (kin-openapi
	// compiles an OpenAPI 3.1 schema anew on every validation).
	body, bodyDone := c.bodies.schemaFor(route, x)
	opts := validationOptions()
	opts.ExcludeResponseBody = bodyDone
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 x.Status,
		Header:                 x.RespHeader,
		Options:                opts,
	}
	in.SetBodyBytes(x.RespBody)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		errs = append(errs, fmt.Errorf("%s: %v", route.Operation.OperationID, err))
	} else if body != nil {
		if err := body.validate(x.RespBody); err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", route.Operation.OperationID, err))
		}
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

// bodySchemas holds the response body schemas of an OpenAPI 3.1 document,
// each compiled once as JSON Schema 2020-12 (the dialect of 3.1) from the
// document itself, so that its references resolve where they point.
type bodySchemas struct {
	// where is the JSON pointer, in the document, of each JSON response
	// body schema.
	where map[*openapi3.SchemaRef]string

	once     sync.Once
	compiler *jsonschema.Compiler // nil: the document could not be loaded

	mu       sync.Mutex
	compiled map[*openapi3.SchemaRef]*bodySchema
	doc      *openapi3.T
}

// bodySchema is one compiled response body schema.
type bodySchema struct {
	name   string // the schema's $ref, for messages
	schema *jsonschema.Schema
}

// documentURL names the document in the compiler; nothing is fetched.
const documentURL = "urn:aap-conformance:openapi.json"

func newBodySchemas(doc *openapi3.T) *bodySchemas {
	b := &bodySchemas{doc: doc, where: map[*openapi3.SchemaRef]string{}, compiled: map[*openapi3.SchemaRef]*bodySchema{}}
	esc := func(s string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(s) }
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.Responses == nil {
				continue
			}
			for code, rr := range op.Responses.Map() {
				if rr == nil || rr.Value == nil {
					continue
				}
				at := "/paths/" + esc(path) + "/" + strings.ToLower(method) + "/responses/" + esc(code)
				if ref, ok := strings.CutPrefix(rr.Ref, "#"); ok {
					at = ref
				} else if rr.Ref != "" {
					continue // another document's: kin-openapi resolved it
				}
				for mt, m := range rr.Value.Content {
					if m != nil && m.Schema != nil && isJSON(mt) {
						b.where[m.Schema] = at + "/content/" + esc(mt) + "/schema"
					}
				}
			}
		}
	}
	return b
}

func isJSON(mediaType string) bool {
	base, _, _ := strings.Cut(strings.ToLower(mediaType), ";")
	base = strings.TrimSpace(base)
	return base == "application/json" || strings.HasSuffix(base, "+json")
}

// schemaFor returns the compiled schema of x's body, and whether it takes
// the body's validation over from kin-openapi (a JSON body with a schema
// compiled here; also a missing one: then there is nothing to check).
func (b *bodySchemas) schemaFor(route *routers.Route, x *Exchange) (*bodySchema, bool) {
	switch {
	case b == nil, x.Method == http.MethodHead, x.Status == http.StatusNotModified, x.Status == http.StatusPermanentRedirect,
		x.Status == http.StatusTemporaryRedirect, x.Status == http.StatusMovedPermanently:
		// kin-openapi validates no body of these.
		return nil, false
	}
	rr := route.Operation.Responses.Status(x.Status)
	if rr == nil {
		rr = route.Operation.Responses.Default()
	}
	if rr == nil || rr.Value == nil {
		return nil, false
	}
	m := rr.Value.Content.Get(x.RespHeader.Get("Content-Type"))
	if m == nil || m.Schema == nil {
		return nil, false
	}
	if ct, _, err := mime.ParseMediaType(x.RespHeader.Get("Content-Type")); err != nil || !isJSON(ct) {
		return nil, false
	}
	s := b.compile(m.Schema)
	return s, s != nil
}

// compile returns ref's compiled schema, compiling it on first use; nil
// when it cannot (kin-openapi then validates the body as it would).
func (b *bodySchemas) compile(ref *openapi3.SchemaRef) *bodySchema {
	at, ok := b.where[ref]
	if !ok {
		return nil
	}
	b.once.Do(b.load)
	if b.compiler == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.compiled[ref]; ok {
		return s
	}
	var s *bodySchema
	if cs, err := b.compiler.Compile(documentURL + "#" + at); err == nil {
		s = &bodySchema{name: ref.Ref, schema: cs}
	}
	b.compiled[ref] = s
	return s
}

// load adds the whole document to the compiler, with the formats
// kin-openapi asserts (its own tables and the contract's uuid), and no
// other: a format neither knows is an annotation.
func (b *bodySchemas) load() {
	data, err := json.Marshal(b.doc)
	if err != nil {
		return
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	for name := range formatsIn(doc, map[string]bool{}) {
		c.RegisterFormat(&jsonschema.Format{Name: name, Validate: kinFormat(name)})
	}
	c.AssertFormat()
	if c.AddResource(documentURL, doc) != nil {
		return
	}
	b.compiler = c
}

func formatsIn(v any, out map[string]bool) map[string]bool {
	switch x := v.(type) {
	case map[string]any:
		if f, ok := x["format"].(string); ok && f != "" {
			out[f] = true
		}
		for _, e := range x {
			formatsIn(e, out)
		}
	case []any:
		for _, e := range x {
			formatsIn(e, out)
		}
	}
	return out
}

var uuidFormat = openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC9562)

// kinFormat validates format name as kin-openapi's validator would with
// validationOptions.
func kinFormat(name string) func(any) error {
	return func(v any) error {
		switch x := v.(type) {
		case string:
			if name == "uuid" {
				return uuidFormat.Validate(x)
			}
			if f, ok := openapi3.SchemaStringFormats[name]; ok {
				return f.Validate(x)
			}
		case json.Number:
			n, err := x.Float64()
			if err != nil {
				return nil
			}
			if f, ok := openapi3.SchemaIntegerFormats[name]; ok && n == math.Trunc(n) && !math.IsInf(n, 0) {
				return f.Validate(int64(n))
			}
			if f, ok := openapi3.SchemaNumberFormats[name]; ok {
				return f.Validate(n)
			}
		}
		return nil
	}
}

// validate checks a body against the schema.
func (s *bodySchema) validate(body []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("response body is not JSON: %v", err)
	}
	if err := s.schema.Validate(v); err != nil {
		// The first line names the compiler's URL of the schema; the
		// document's own $ref says it better.
		msg := err.Error()
		if _, rest, ok := strings.Cut(msg, "\n"); ok {
			msg = rest
		}
		name := s.name
		if name != "" {
			name = " " + name
		}
		return fmt.Errorf("response body doesn't match schema%s: %s", name, msg)
	}
	return nil
}
