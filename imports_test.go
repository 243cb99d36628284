package acds_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestImportRules enforces the rules of the house (DESIGN §2) over the
// module's own packages and everything they import, transitively:
//
//   - the wire contract (the root package) imports only the standard
//     library, and not net/http;
//   - client never imports server;
//   - verify never imports server, client or internal/stores/sqlstore;
//   - no library package imports cmd/…;
//   - server may import every floor below it (acds, verify, attestation,
//     mpctls, fhir, portal, store), and nothing above it: not client,
//     service or cmd;
//   - internal/ is by floor: internal/base (leaves), internal/gen
//     (generators), internal/stores (the stores), internal/serving (what
//     serving needs beside the handler), internal/demo (the demo portal)
//     and internal/testrig (test rigs), each imported only from above.
func TestImportRules(t *testing.T) {
	const mod = "github.com/acds-project/acds"
	out, err := exec.Command("go", "list", "-deps=false", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, deps := fields[0], fields[1:]
		for _, v := range importViolations(mod, pkg, deps) {
			t.Error(v)
		}
	}
	// Examples show what a user of the module can write: they import
	// public packages only (what those use inside is theirs).
	out, err = exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./examples/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		for _, d := range fields[1:] {
			if strings.HasPrefix(d, mod+"/internal/") {
				t.Errorf("%s imports %s: examples use public packages only", fields[0], d)
			}
		}
	}
}

// importViolations lists the rules pkg breaks by depending on deps.
func importViolations(mod, pkg string, deps []string) []string {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, mod), "/")
	under := func(p, dir string) bool { return p == mod+"/"+dir || strings.HasPrefix(p, mod+"/"+dir+"/") }
	var bad []string
	forbid := func(why string, match func(string) bool) {
		for _, d := range deps {
			if match(d) {
				bad = append(bad, pkg+" imports "+d+": "+why)
			}
		}
	}
	switch {
	case pkg == mod:
		forbid("the wire contract imports only the standard library", func(d string) bool {
			first, _, _ := strings.Cut(d, "/")
			return strings.Contains(first, ".") || d == "net/http"
		})
	case under(pkg, "client"):
		forbid("client never imports server", func(d string) bool { return under(d, "server") || under(d, "service") })
	case under(pkg, "verify"):
		forbid("verify never imports server, client or internal/stores/sqlstore", func(d string) bool {
			return under(d, "server") || under(d, "service") || under(d, "client") || under(d, "internal/stores/sqlstore")
		})
	case under(pkg, "server"):
		forbid("server imports only the floors below it", func(d string) bool {
			return under(d, "client") || under(d, "service") || under(d, "cmd")
		})
	}
	if !strings.HasPrefix(rel, "cmd/") && !strings.HasPrefix(rel, "examples/") && !slices.Contains([]string{"cmd", "examples"}, rel) {
		forbid("library packages never import cmd", func(d string) bool { return under(d, "cmd") })
	}
	// The floors of DESIGN §2: what each lower package may build on
	// (transitively), besides itself and the standard library. The root
	// acds — the one home of the wire's constants (problem codes, system
	// types, formats, statuses) — is allowed to every floor, so no floor
	// declares them again; internal/base/jsonscan is a leaf helper.
	floors := []struct {
		dir  string
		may  []string
		rule string
	}{
		{"attestation", []string{"attestation"}, "attestation builds on nothing of ours but the wire's constants"},
		{"mpctls", []string{"mpctls"}, "mpctls builds on nothing of ours"},
		{"fhir", []string{"fhir"}, "fhir builds on nothing of ours but the wire's constants"},
		{"store", []string{"store"}, "store builds on nothing of ours but the wire's constants"},
		{"portal", []string{"portal", "fhir", "mpctls", "internal/base/jsonscan"}, "portal may import fhir and mpctls"},
		{"verify", []string{"verify", "attestation", "mpctls", "fhir"}, "verify may import attestation, mpctls and fhir"},
		{"client", []string{"client", "verify", "attestation", "mpctls", "fhir"}, "client may import verify"},
		// internal/ by floor: leaves, the stores, what serving needs
		// beside the handler, the demo portal, generators and test rigs.
		{"internal/base", []string{"internal/base"}, "internal/base holds leaves that build on nothing of ours"},
		{"internal/gen", []string{"internal/gen"}, "generators build on nothing of ours"},
		{"internal/stores", []string{"internal/stores", "store", "internal/base"}, "a store builds on package store"},
		{"internal/serving", []string{"internal/serving", "attestation"}, "internal/serving builds on attestation"},
		{"internal/demo", []string{"internal/demo", "portal", "fhir", "mpctls", "internal/base"}, "the demo portal builds on portal"},
	}
	for _, f := range floors {
		if !under(pkg, f.dir) {
			continue
		}
		forbid(f.rule, func(d string) bool {
			if !strings.HasPrefix(d, mod+"/") {
				return false // the standard library, third parties and the root acds
			}
			for _, ok := range f.may {
				if under(d, ok) {
					return false
				}
			}
			return true
		})
	}
	// Upward arrows into internal/: test rigs serve tests and each other;
	// the stores and what serving needs only the installation (service)
	// and what builds on it; the demo portal only the command.
	if !under(pkg, "internal/testrig") {
		forbid("only tests and test rigs import a test rig", func(d string) bool { return under(d, "internal/testrig") })
	}
	if !slices.ContainsFunc(deps, func(d string) bool { return under(d, "service") }) && !under(pkg, "service") &&
		!under(pkg, "internal/testrig") && !under(pkg, "internal/stores") && !under(pkg, "internal/serving") {
		forbid("only service and what builds on it import the stores and internal/serving", func(d string) bool {
			return under(d, "internal/stores") || under(d, "internal/serving")
		})
	}
	if !under(pkg, "cmd") && !under(pkg, "internal/testrig") && !under(pkg, "internal/demo") {
		forbid("only cmd imports the demo portal", func(d string) bool { return under(d, "internal/demo") })
	}
	if under(pkg, "verify") || under(pkg, "client") {
		forbid("offline verification never links a device driver", func(d string) bool {
			return strings.HasPrefix(d, mod+"/attestation/") && strings.HasSuffix(d, "/device")
		})
	}
	return bad
}

// TestImportRulesCatchViolations: the rules fail on the violations they
// name.
func TestImportRulesCatchViolations(t *testing.T) {
	const mod = "github.com/acds-project/acds"
	for _, tc := range []struct {
		pkg, dep string
	}{
		{mod, "net/http"},
		{mod, "github.com/google/uuid"},
		{mod + "/client", mod + "/server"},
		{mod + "/verify", mod + "/internal/stores/sqlstore"},
		{mod + "/verify", mod + "/client"},
		{mod + "/server", mod + "/client"},
		{mod + "/portal", mod + "/cmd/acds"},
		{mod + "/portal", mod + "/server"},
		{mod + "/fhir", mod + "/portal"},
		{mod + "/mpctls/prover", mod + "/portal"},
		{mod + "/attestation/tpm", mod + "/store"},
		{mod + "/store", mod + "/server"},
		{mod + "/verify", mod + "/attestation/tpm/device"},
		{mod + "/verify", mod + "/portal"},
		{mod + "/internal/base/jsonscan", mod + "/portal"},
		{mod + "/internal/stores/sqlstore", mod + "/server"},
		{mod + "/internal/demo/demoportal", mod + "/service"},
		{mod + "/portal", mod + "/internal/testrig/dnstest"},
		{mod + "/server", mod + "/internal/stores/sqlstore"},
		{mod + "/portal", mod + "/internal/demo/demoportal"},
	} {
		if len(importViolations(mod, tc.pkg, []string{tc.dep})) == 0 {
			t.Errorf("%s importing %s passes", tc.pkg, tc.dep)
		}
	}
	for _, tc := range []struct{ pkg, dep string }{
		{mod + "/server", mod + "/portal"},
		{mod + "/server", mod + "/verify"},
		{mod + "/service", mod + "/internal/stores/sqlstore"},
		{mod + "/portal", mod + "/internal/base/jsonscan"},
		{mod + "/cmd/acds", mod + "/internal/demo/demoportal"},
		{mod + "/internal/testrig/loadtest/cmd/jsonfloor", mod + "/internal/stores/sqlstore"},
		{mod + "/client", mod + "/verify"},
		{mod + "/fhir", mod},
		{mod + "/portal", mod + "/mpctls/prover"},
		{mod + "/verify", mod + "/attestation/tpm"},
		{mod + "/store", mod},
	} {
		if v := importViolations(mod, tc.pkg, []string{tc.dep}); len(v) != 0 {
			t.Errorf("%s importing %s refused: %v", tc.pkg, tc.dep, v)
		}
	}
}

// TestArchitectureListsEveryPackage: docs/architecture.md names every
// package of the module, in backquotes, by its path, by a brace list
// (`attestation/{sevsnp,tdx,tpm}`) or under a folder (`examples/…`), so
// that the page cannot leave a package out.
func TestArchitectureListsEveryPackage(t *testing.T) {
	const mod = "github.com/acds-project/acds"
	doc, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	var folders []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(string(doc), -1) {
		for _, p := range expandBraces(m[1]) {
			if dir, ok := strings.CutSuffix(p, "/…"); ok {
				folders = append(folders, dir+"/")
				continue
			}
			named[p] = true
		}
	}
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg, mod), "/")
		if rel == "" {
			rel = "acds"
		}
		if named[rel] || slices.ContainsFunc(folders, func(f string) bool { return strings.HasPrefix(rel, f) }) {
			continue
		}
		t.Errorf("docs/architecture.md does not name package %s", rel)
	}
}

// expandBraces expands one brace list: "a/{b,c}/d" is a/b/d and a/c/d.
func expandBraces(s string) []string {
	open, close := strings.Index(s, "{"), strings.Index(s, "}")
	if open < 0 || close < open {
		return []string{s}
	}
	var out []string
	for _, alt := range strings.Split(s[open+1:close], ",") {
		out = append(out, s[:open]+alt+s[close+1:])
	}
	return out
}
