package approval_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/approval"
	"github.com/agentowl/agentowl/internal/store/storetest"
)

// TestOperatorUseCasesCheckTheirScope calls the operator use-cases
// directly, as the console will, with no HTTP gate in front: each resolves
// the tenant from the principal and checks the role itself. A member is
// forbidden an admin change, another tenant's name is not_found, and a
// missing object's not_found names the tenant searched (issue 11, items 4
// and 6).
func TestOperatorUseCasesCheckTheirScope(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		_, acc, appr, admin := newApprovals(t, b)
		if _, err := acc.CreateOperator(ctx, admin, "acme", "mia", agentowl.RoleMember); err != nil {
			t.Fatal(err)
		}
		issued, err := acc.CreateOperatorToken(ctx, admin, "acme", "mia", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		member := authenticate(t, acc, issued.Secret, agentowl.TokenOperator)
		const missing = "00000000-0000-4000-8000-000000000000"

		for what, err := range map[string]error{
			"set validity": func() error {
				_, err := appr.SetApprovalValidity(ctx, member, "acme", missing, time.Minute)
				return err
			}(),
			"create policy": func() error {
				_, err := appr.CreatePolicy(ctx, member, "acme", &agentowl.Policy{Tool: "*", Effect: agentowl.EffectApprove})
				return err
			}(),
			"delete policy": appr.DeletePolicy(ctx, member, "acme", missing),
		} {
			if code := agentowl.ErrorCode(err); code != agentowl.ECodeForbidden {
				t.Errorf("member %s: %v (code %q), want forbidden", what, err, code)
			}
		}

		for what, err := range map[string]error{
			"list requests": func() error {
				_, err := appr.ListRequests(ctx, admin, "other", approval.ListFilter{})
				return err
			}(),
			"decide": func() error {
				_, err := appr.Decide(ctx, admin, "other", missing, approval.DecideParams{Approve: true})
				return err
			}(),
			"instances": func() error { _, err := appr.TenantInstances(ctx, admin, "other"); return err }(),
			"policies":  func() error { _, err := appr.ListPolicies(ctx, admin, "other"); return err }(),
		} {
			if code := agentowl.ErrorCode(err); code != agentowl.ECodeNotFound {
				t.Errorf("another tenant's %s: %v (code %q), want not_found", what, err, code)
			}
		}

		_, err = appr.Decide(ctx, member, "acme", missing, approval.DecideParams{Approve: true})
		want := `No approval request "` + missing + `" in tenant "acme".`
		var ae *agentowl.Error
		if !errors.As(err, &ae) || ae.Code != agentowl.ECodeNotFound || ae.Message != want {
			t.Errorf("deciding a missing request: %v, want not_found %q", err, want)
		}
	})
}

// newApprovals is the approval service over a fresh store of backend b,
// with the tenant "acme" bootstrapped and its admin signed in.
func newApprovals(t *testing.T, b storetest.Backend) (agentowl.Store, *access.Service, *approval.Service, *access.Principal) {
	t.Helper()
	st, acc, appr, _ := newApproval(t, b)
	return st, acc, appr, bootstrapAcme(t, acc)
}

// bootstrapAcme bootstraps tenant acme: its admin's principal.
func bootstrapAcme(tb testing.TB, acc *access.Service) *access.Principal {
	tb.Helper()
	boot, err := acc.Bootstrap(context.Background(), "acme")
	if err != nil {
		tb.Fatal(err)
	}
	return authenticate(tb, acc, boot.Token, agentowl.TokenOperator)
}

// authenticate signs in with a token of kind.
func authenticate(tb testing.TB, acc *access.Service, secret string, kind agentowl.TokenKind) *access.Principal {
	tb.Helper()
	p, err := acc.Authenticate(context.Background(), secret, kind)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}
