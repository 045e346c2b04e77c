package sqlite

import (
	"database/sql/driver"
	"fmt"

	sqlite "modernc.org/sqlite"

	"github.com/agentowl/agentowl/internal/auditchain"
)

// agentowl_audit_hash(prev, seq, tenant_id, at, actor, action, target,
// request_id, details) is the audit chain's canonical hash
// (auditchain.Sum) in SQL, as PostgreSQL's migration 00026 defines it:
// migration 00026 chains the existing entries with it and every append
// computes its entry's hash with it, in the statement that advances the
// tenant's chain head. NULL in, NULL out. Registered for every connection
// the "sqlite" driver opens in this process.
func init() {
	sqlite.MustRegisterDeterministicScalarFunction("agentowl_audit_hash", 9, auditHash)
}

func auditHash(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
	for _, a := range args {
		if a == nil {
			return nil, nil
		}
	}
	bytesOf := func(v driver.Value) ([]byte, error) {
		switch x := v.(type) {
		case []byte:
			return x, nil
		case string:
			return []byte(x), nil
		}
		return nil, fmt.Errorf("agentowl_audit_hash: %T where text or a blob belongs", v)
	}
	intOf := func(v driver.Value) (int64, error) {
		if x, ok := v.(int64); ok {
			return x, nil
		}
		return 0, fmt.Errorf("agentowl_audit_hash: %T where an integer belongs", v)
	}
	var texts [7][]byte
	var err error
	prev, err := bytesOf(args[0])
	if err != nil {
		return nil, err
	}
	seq, err1 := intOf(args[1])
	at, err2 := intOf(args[3])
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%w%w", err1, err2)
	}
	for i, j := range []int{2, 4, 5, 6, 7, 8} {
		if texts[i], err = bytesOf(args[j]); err != nil {
			return nil, err
		}
	}
	return auditchain.Sum(prev, seq, string(texts[0]), at, string(texts[1]), string(texts[2]), string(texts[3]),
		string(texts[4]), texts[5]), nil
}
