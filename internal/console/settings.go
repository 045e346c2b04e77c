package console

// tenantRoute is one tenant page: its pattern, "{t}" standing for the tenant's
// path prefix, and its handler.
type tenantRoute struct {
	pattern string
	h       func(q *req) error
}

// configPages are the audit and configuration views (…/audit, …/settings).
func (c *Console) configPages() []tenantRoute { return nil }
