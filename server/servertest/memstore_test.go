package servertest_test

import (
	"testing"

	"github.com/acds-project/acds/internal/store"
	"github.com/acds-project/acds/internal/store/storetest"
	"github.com/acds-project/acds/server/servertest"
)

// TestMemStoreConformance runs the store conformance suite against the
// fake, so server tests that use it rely on the same behaviour as with the
// real backends.
func TestMemStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s := servertest.NewMemStore()
		t.Cleanup(func() { s.Close() })
		return s
	})
}
