package verify_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"

	"github.com/acds-project/acds/verify"
)

// TestZeroVerifier: a Verifier not made by New (zero or nil) refuses with
// ErrNotMadeByNew (an ErrPolicy) instead of panicking, whatever it is
// given; a nil *Result has no reasons.
func TestZeroVerifier(t *testing.T) {
	for name, v := range map[string]*verify.Verifier{"zero": {}, "nil": nil} {
		for _, in := range [][]byte{nil, []byte("AAAA"), getFixture(t).rawBundle(t, []byte(`{"resourceType":"Bundle"}`))} {
			if _, err := v.Verify(in); !errors.Is(err, verify.ErrNotMadeByNew) || !errors.Is(err, verify.ErrPolicy) {
				t.Errorf("%s Verify: %v", name, err)
			}
			if _, err := v.VerifyOutput(in, []byte("{}")); !errors.Is(err, verify.ErrNotMadeByNew) {
				t.Errorf("%s VerifyOutput: %v", name, err)
			}
		}
		if err := v.VerifyConnection(tls.ConnectionState{PeerCertificates: []*x509.Certificate{{}}}); !errors.Is(err, verify.ErrNotMadeByNew) {
			t.Errorf("%s VerifyConnection: %v", name, err)
		}
		if r := v.VerifyCertificate(&x509.Certificate{}); r.Valid || len(r.Failures) != 1 {
			t.Errorf("%s VerifyCertificate: %+v", name, r)
		}
		if _, err := v.VerifyBoot([]byte("AAAA")); !errors.Is(err, verify.ErrNotMadeByNew) {
			t.Errorf("%s VerifyBoot: %v", name, err)
		}
		if v.Allowed("sev-snp") != nil || v.Manifest() != nil || v.Stats() != (verify.Stats{}) {
			t.Errorf("%s: a Verifier not made by New allows or holds something", name)
		}
	}
	if (*verify.Result)(nil).Reasons() != nil {
		t.Error("a nil Result has reasons")
	}
}
