package httpapi

// RouteAuths returns the auth kind of every row of the route table, by
// "METHOD pattern", for the external tests.
func RouteAuths() map[string]string {
	out := map[string]string{}
	for _, rt := range (&Server{}).routes() {
		out[rt.method+" "+rt.pattern] = string(rt.auth)
	}
	return out
}

// DeliveryView is a message of the deliveries API as the external tests
// decode it.
type DeliveryView = wireMessage
