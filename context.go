package agentowl

import "context"

type requestIDKey struct{}

// ContextWithRequestID returns ctx carrying the HTTP exchange's X-Request-ID,
// which audit entries record.
func ContextWithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestIDFromContext returns the request ID in ctx, or "" if none.
func RequestIDFromContext(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}
