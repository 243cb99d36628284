package attestation

import "errors"

// ErrNotJWSInput is returned by SignJWS for content that is not a JWS
// signing input.
var ErrNotJWSInput = errors.New("attestation: not a JWS signing input (base64url header and payload joined by a dot)")

// SignJWS signs a JWS signing input (RFC 7515 §5.1:
// BASE64URL(protected header) "." BASE64URL(payload)) with the enclave's
// boot signing key, ES256, and returns the signature as R‖S (64 bytes), so
// a message the enclave sends (a webhook delivery) is attributable to the
// attested enclave by the same key its claims are signed with.
//
// Only base64url characters and one dot are accepted: such content can
// never be taken for the COSE Sig_structure of a claims statement (a CBOR
// array, first byte 0x84), so no signature made here verifies as claims.
func (e *Enclave) SignJWS(signingInput []byte) ([]byte, error) {
	dots := 0
	for _, c := range signingInput {
		switch {
		case c == '.':
			dots++
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return nil, ErrNotJWSInput
		}
	}
	if dots != 1 || len(signingInput) < 3 {
		return nil, ErrNotJWSInput
	}
	return e.signer.signer.Sign(e.rand, signingInput)
}
