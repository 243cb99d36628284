package portal_test

import (
	"testing"

	"github.com/acds-project/acds/portal"
)

// TestRedact: the one redaction rule blanks out every secret of three
// characters or more, wherever it stands, and leaves shorter ones (which
// would blank out ordinary text) alone.
func TestRedact(t *testing.T) {
	for _, c := range []struct{ msg, want string }{
		{"login alice-77 with hunter2-xyz refused", "login [redacted] with [redacted] refused"},
		{"hunter2-xyzhunter2-xyz", "[redacted][redacted]"},
		{"no secret here", "no secret here"},
		{"a short pw: ab", "a short pw: ab"},
	} {
		if got := portal.Redact(c.msg, "alice-77", "hunter2-xyz", "ab", ""); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.msg, got, c.want)
		}
	}
}
