package server_test

import (
	"strings"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/verify"
)

// TestVerifyNotABundleSaysWhyOnce: POST /v1/verify of bytes that are not
// an attestation bundle names the decoder's reason once, not the chain
// of wrappers ("malformed attestation bundle: not an attestation bundle:
// bundle: attestation: malformed input: cbor: …").
func TestVerifyNotABundleSaysWhyOnce(t *testing.T) {
	v, err := verify.New(verify.Policy{Measurements: map[string][][]byte{"sev-snp": {make([]byte, 48)}}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *server.Config) { c.Verifier = server.Verify(v) })
	for in, want := range map[string]string{
		"AAAA": "not an attestation bundle: cbor: 2 bytes of extraneous data starting at index 1",
		"oQ==": "not an attestation bundle: unexpected EOF",
	} {
		resp, b := h.do("POST", "/v1/verify", "", acds.VerifyRequest{AttestationBundle: in})
		p := wantProblem(t, resp, b, acds.ProblemInvalidRequest)
		if len(p.Errors) != 1 || p.Errors[0].Message != want {
			t.Errorf("%s: %s, want the message %q", in, b, want)
		}
		if n := strings.Count(string(b), "attestation bundle"); n != 2 { // detail and errors[0], once each
			t.Errorf("%s: %q names the attestation bundle %d times", in, b, n)
		}
	}
}
