package portal

import (
	"go/build"
	"slices"
	"strings"
	"testing"
)

// TestImports keeps portal in its place in the house (DESIGN §2): besides
// the standard library it imports the wire contract's names (acds: system
// types and problem codes), the FHIR specification's tables (fhir/spec:
// the Patient compartment), mpctls and the well-kept libraries that do its
// OAuth2, HTML and JOSE work, and nothing internal but the house's one JSON
// scanner, internal/base/jsonscan (a leaf on the standard library; the demo
// portal is internal/demo/demoportal, which imports portal, not the reverse).
func TestImports(t *testing.T) {
	allowed := []string{
		"github.com/acds-project/acds",
		"github.com/acds-project/acds/fhir/spec",
		"github.com/acds-project/acds/internal/base/jsonscan",
		"github.com/acds-project/acds/mpctls",
		"github.com/acds-project/acds/mpctls/notary",
		"github.com/acds-project/acds/mpctls/prover",
		"golang.org/x/oauth2",
		"golang.org/x/net/html",
		"github.com/go-jose/go-jose/v4",
		"github.com/go-jose/go-jose/v4/cryptosigner",
		"github.com/go-jose/go-jose/v4/jwt",
	}
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		first, _, _ := strings.Cut(imp, "/")
		if strings.Contains(first, ".") && !slices.Contains(allowed, imp) {
			t.Errorf("portal imports %s", imp)
		}
	}
	for _, lib := range []string{"golang.org/x/oauth2", "golang.org/x/net/html", "github.com/go-jose/go-jose/v4/jwt"} {
		if !slices.Contains(pkg.Imports, lib) {
			t.Errorf("portal does not import %s: is a hand-written version back?", lib)
		}
	}
}
