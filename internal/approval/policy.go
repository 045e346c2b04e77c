package approval

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/google/cel-go/cel"

	"github.com/agentowl/agentowl"
)

// policyEngine compiles CEL conditions once and evaluates them with a cost
// limit, so a rule cannot stall request creation.
type policyEngine struct {
	env      *cel.Env
	mu       sync.Mutex
	programs map[string]cel.Program // by condition text
}

// conditionCostLimit bounds one evaluation; simple comparisons cost < 20.
const conditionCostLimit = 10_000

func newPolicyEngine() *policyEngine {
	env, err := cel.NewEnv(
		cel.Variable("tool", cel.StringType),
		cel.Variable("arguments", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("context", cel.MapType(cel.StringType, cel.DynType)),
	)
	if err != nil {
		panic(err) // static declarations
	}
	return &policyEngine{env: env, programs: map[string]cel.Program{}}
}

// compile checks that condition is a boolean CEL expression over tool,
// arguments and context.
func (e *policyEngine) compile(condition string) (cel.Program, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.programs[condition]; ok {
		return p, nil
	}
	ast, iss := e.env.Compile(condition)
	if iss != nil && iss.Err() != nil {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidPolicy, "condition", "The condition does not compile: %s", iss.Err())
	}
	if ast.OutputType() != cel.BoolType {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidPolicy, "condition", "The condition must be a boolean expression, not %s.", ast.OutputType())
	}
	p, err := e.env.Program(ast, cel.CostLimit(conditionCostLimit))
	if err != nil {
		return nil, agentowl.FieldError(agentowl.ECodeInvalidPolicy, "condition", "The condition cannot be evaluated: %s", err)
	}
	e.programs[condition] = p
	return p, nil
}

// match returns the first rule that decides the request, or nil. A rule whose
// condition fails to evaluate (a missing argument, a type mismatch) does not
// match: policy never approves by accident.
func (e *policyEngine) match(rules []*agentowl.Policy, in *agentowl.CreateRequestInput) (*agentowl.Policy, error) {
	var vars map[string]any
	for _, r := range rules {
		if r.Tool != "*" && r.Tool != in.Tool {
			continue
		}
		if r.Condition == "" {
			return r, nil
		}
		p, err := e.compile(r.Condition)
		if err != nil {
			continue
		}
		if vars == nil {
			vars = map[string]any{"tool": in.Tool, "arguments": celValue(in.Arguments), "context": map[string]any{}}
			if in.Context != nil {
				vars["context"] = celValue(in.Context)
			}
		}
		out, _, err := p.Eval(vars)
		if err != nil {
			continue
		}
		if b, ok := out.Value().(bool); ok && b {
			return r, nil
		}
	}
	return nil, nil
}

// celValue decodes JSON for CEL: integers as int64, other numbers as double.
func celValue(raw json.RawMessage) any {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil
	}
	return convertNumbers(v)
}

func convertNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = convertNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = convertNumbers(e)
		}
	}
	return v
}
