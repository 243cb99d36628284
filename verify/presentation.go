package verify

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/mpctls"
)

// ErrPresentation: an MPC-TLS presentation does not verify against the
// bundle.
var ErrPresentation = errors.New("mpc-tls presentation not verified")

// VerifyPresentation lets a holder of the fetched data re-check it offline:
// the bundle must be valid under the policy (see Verify), and presentation
// (an encoded mpctls.Presentation) must verify against the notary statement
// of the given session of the bundle — every disclosed server record in the
// statement's Merkle root, every AEAD tag under the disclosed server key —
// with a trusted notary key and the session's host. It returns the bundle's
// result and the disclosed, decrypted server records. Presentations travel
// beside the bundle, not in it: they disclose response plaintext.
func (v *Verifier) VerifyPresentation(bundle []byte, session int, presentation []byte) (*Result, *mpctls.Disclosed, error) {
	res, err := v.Verify(bundle)
	if err != nil {
		return nil, nil, err
	}
	if !res.Valid {
		return res, nil, fmt.Errorf("%w: the bundle is not valid: %w", ErrPresentation, res.Err())
	}
	c := res.Claims
	if c.Source.Kind != acds.SourceMPCTLS || session < 0 || session >= len(c.Source.Sessions) {
		return res, nil, fmt.Errorf("%w: the bundle has no session %d", ErrPresentation, session)
	}
	b, err := attestation.ParseBundle(bundle)
	if err != nil {
		return res, nil, err
	}
	var p mpctls.Presentation
	if err := p.Unmarshal(presentation); err != nil {
		return res, nil, fmt.Errorf("%w: %w", ErrPresentation, err)
	}
	trusted, _ := v.trustedNotaries(b, c)
	d, err := mpctls.VerifyPresentation(b.NotaryStatements[session], &p, trusted)
	if err != nil {
		return res, nil, fmt.Errorf("%w: %w", ErrPresentation, err)
	}
	host := c.Source.Sessions[session].Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if !strings.EqualFold(d.Statement.SNI, host) {
		return res, nil, fmt.Errorf("%w: statement is for %q, the claims for %q", ErrPresentation, d.Statement.SNI, host)
	}
	return res, d, nil
}

// trustedNotaries returns the notary keys trusted for bundle b with claims
// c, and the relaxation that applied, if any.
func (v *Verifier) trustedNotaries(b *attestation.Bundle, c *attestation.Claims) ([]ed25519.PublicKey, string) {
	trusted := v.notaryKeys
	if v.p.UnsafeTrustClaimedNotaryKey && v.p.UnsafeAllowSimulation && b.Boot.Profile == attestation.ProfileSEVSNPSim && len(c.NotaryKey) == ed25519.PublicKeySize {
		trusted = append(append([]ed25519.PublicKey(nil), trusted...), ed25519.PublicKey(c.NotaryKey))
		return trusted, "trusted the notary key the simulated enclave's claims name (UnsafeTrustClaimedNotaryKey; " + fmt.Sprintf("%x", c.NotaryKey[:8]) + "…)"
	}
	return trusted, ""
}
