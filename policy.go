package agentowl

import "time"

// PolicyEffect is what a matching policy rule records at request creation.
type PolicyEffect string

const (
	// EffectApprove approves the request at creation.
	EffectApprove PolicyEffect = "approve"
	// EffectDeny denies the request at creation.
	EffectDeny PolicyEffect = "deny"
)

// Policy is a rule that decides matching approval requests at creation.
// Rules of the request's instance are tried before the tenant's rules; within
// each, lower Priority first, then older first. The first rule whose Tool
// matches and whose Condition is true decides.
type Policy struct {
	ID         string
	TenantID   string
	InstanceID string // empty: applies to every instance of the tenant
	Name       string
	Tool       string // exact tool name, or "*" for any tool
	Condition  string // CEL expression over tool, arguments and context; empty means true
	Effect     PolicyEffect
	Note       string
	Priority   int
	CreatedAt  time.Time
}
