package attestation_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The verification packages never touch the machine: they import no
// device package of their own family and no guest-device client (package
// attestation/…/device does, and only it).
func TestVerificationImportsNoDevice(t *testing.T) {
	for _, pkg := range []string{"./sevsnp", "./tdx", "./tpm"} {
		out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, imp := range strings.Fields(string(out)) {
			if strings.HasSuffix(imp, "/device") || strings.HasSuffix(imp, "-guest/client") || strings.HasSuffix(imp, "go-tpm-tools/client") {
				t.Errorf("%s imports %s", pkg, imp)
			}
		}
	}
}
