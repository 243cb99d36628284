package acds_test

import (
	"go/build"
	"strings"
	"testing"
)

// TestImportRules enforces the house rules: the wire contract imports only
// the standard library, and the client only the wire contract.
func TestImportRules(t *testing.T) {
	for dir, allowed := range map[string][]string{
		".":      nil,
		"client": {"github.com/acds-project/acds"},
		"server": {"github.com/acds-project/acds", "github.com/acds-project/acds/attestation", "github.com/acds-project/acds/internal/jsonscan", "github.com/acds-project/acds/internal/store", "github.com/google/uuid", "golang.org/x/crypto/argon2", "golang.org/x/time/rate"},
	} {
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
	imports:
		for _, imp := range pkg.Imports {
			first, _, _ := strings.Cut(imp, "/")
			if !strings.Contains(first, ".") {
				continue // standard library
			}
			for _, a := range allowed {
				if imp == a {
					continue imports
				}
			}
			t.Errorf("package %s imports %s", dir, imp)
		}
	}
}
