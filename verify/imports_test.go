package verify_test

import (
	"go/build"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/acds-project/acds"

// TestVerifyPathImports walks every package of this module that verify
// depends on, directly or through other packages of the module (build
// constraints of this platform, test files excluded), and checks that none
// imports net/http (or a package under it), server, client or the store.
// Packages of other modules are not walked: their imports are their own
// (see the package doc for the ones that import net/http).
func TestVerifyPathImports(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := func(p string) bool {
		return p == "net/http" || strings.HasPrefix(p, "net/http/") ||
			p == module+"/server" || strings.HasPrefix(p, module+"/server/") ||
			p == module+"/client" || strings.HasPrefix(p, module+"/client/") ||
			p == module+"/internal/stores/sqlstore" || strings.HasPrefix(p, module+"/internal/stores/sqlstore/")
	}
	seen := map[string]bool{}
	queue := []string{module + "/verify"}
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		if seen[path] {
			continue
		}
		seen[path] = true
		dir := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(path, module), "/")))
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, imp := range pkg.Imports {
			if forbidden(imp) {
				t.Errorf("%s imports %s", path, imp)
			}
			if imp == module || strings.HasPrefix(imp, module+"/") {
				queue = append(queue, imp)
			}
		}
	}
	// The walk must have reached the packages the doc names.
	for _, p := range []string{module, module + "/attestation", module + "/attestation/sevsnp", module + "/attestation/tdx", module + "/attestation/tpm", module + "/mpctls"} {
		if !seen[p] {
			t.Errorf("the walk did not reach %s; reached %v", p, slices.Sorted(maps.Keys(seen)))
		}
	}
}
