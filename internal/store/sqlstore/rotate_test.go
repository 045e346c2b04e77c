package sqlstore_test

import (
	"testing"

	"github.com/agentowl/agentowl/internal/store/storetest"
)

// The secret key rotates under load and resumes after a stop, on both
// dialects (storetest.KeyRotationUnderLoad, KeyRotationResumes).
func TestKeyRotation(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name+"/under-load", func(t *testing.T) {
			t.Parallel()
			storetest.KeyRotationUnderLoad(t, b)
		})
		t.Run(b.Name+"/resumes", func(t *testing.T) {
			t.Parallel()
			storetest.KeyRotationResumes(t, b)
		})
	}
}
