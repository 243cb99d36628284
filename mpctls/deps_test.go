package mpctls

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoNetHTTP keeps the package on the offline verification path: neither
// it nor anything it depends on may import net/http.
func TestNoNetHTTP(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "net/http" || strings.HasPrefix(p, "net/http/") {
			t.Fatalf("mpctls depends on %s", p)
		}
	}
}
