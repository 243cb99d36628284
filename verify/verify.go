package verify

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sevsnp"
	"github.com/acds-project/acds/attestation/tdx"
	"github.com/acds-project/acds/attestation/tpm"
	"github.com/acds-project/acds/mpctls"
	"github.com/google/go-sev-guest/kds"
)

// Verifier checks bundles under one policy. It keeps the one bounded cache
// of verified evidence (keyed by the digest of the boot evidence bytes;
// Policy.CacheSize), so verifying many outputs of
// the same enclave, or connecting to it again over attested TLS, costs
// little more than their signatures. It is safe for concurrent use; share
// one to share its cache. Make it with New: the zero Verifier trusts
// nothing and its methods say so (ErrNotMadeByNew) instead of verifying.
type Verifier struct {
	p            Policy
	kinds        map[string]attestation.EvidenceVerifier // per profile
	measurements map[string][][]byte
	notaryKeys   []ed25519.PublicKey
	cache        *evidenceCache
}

// New returns a verifier for p, or a *[PolicyError] (wrapping ErrPolicy)
// naming the field of a contradictory or empty policy; the rules are those
// of [Policy] and are listed with PolicyError. See [Policy] for the zero
// values.
func New(p Policy) (*Verifier, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	if p.SessionWindow <= 0 {
		p.SessionWindow = time.Hour
	}
	if p.ClockSkew <= 0 {
		p.ClockSkew = 5 * time.Minute
	}
	v := &Verifier{
		p:            p,
		measurements: map[string][][]byte{},
		cache:        newEvidenceCache(p.CacheSize),
	}
	minTCB := map[string]kds.TCBParts{}
	for prof, ms := range p.Measurements {
		v.measurements[prof] = append(v.measurements[prof], ms...)
	}
	v.notaryKeys = append(v.notaryKeys, p.NotaryKeys...)
	for _, prof := range []string{attestation.ProfileSEVSNP, attestation.ProfileSEVSNPSim} {
		minTCB[prof] = p.MinimumTCB
	}
	if m := p.Manifest; m != nil {
		for prof, mp := range m.Profiles {
			v.measurements[prof] = append(v.measurements[prof], mp.Measurements...)
			if t := mp.MinimumTCB; t != nil {
				minTCB[prof] = maxTCB(minTCB[prof], kds.TCBParts{BlSpl: t.Bootloader, TeeSpl: t.TEE, SnpSpl: t.SNP, UcodeSpl: t.Microcode})
			}
		}
		v.notaryKeys = append(v.notaryKeys, m.NotaryKeys...)
	}
	v.kinds = map[string]attestation.EvidenceVerifier{
		attestation.ProfileSEVSNP: sevsnp.NewVerifier(sevsnp.Roots{AMD: p.AMDRoots}).WithMinimumTCB(minTCB[attestation.ProfileSEVSNP]),
		attestation.ProfileSEVSNPSim: sevsnp.NewVerifier(sevsnp.Roots{UnsafeTrustEvidenceChain: true, PinnedSimulatedRoots: p.SimulatedRoots}).
			WithMinimumTCB(minTCB[attestation.ProfileSEVSNPSim]),
		attestation.ProfileTDX: tdx.NewVerifier(tdx.Options{Roots: p.IntelRoots, Collateral: p.TDXCollateral}),
		attestation.ProfileTPM: tpm.NewVerifier(tpm.Options{TrustedAKs: p.TPMTrustedAKs, Roots: p.TPMRoots, PCRs: p.TPMPCRs}),
	}
	return v, nil
}

func maxTCB(a, b kds.TCBParts) kds.TCBParts {
	return kds.TCBParts{
		BlSpl: max(a.BlSpl, b.BlSpl), TeeSpl: max(a.TeeSpl, b.TeeSpl), SnpSpl: max(a.SnpSpl, b.SnpSpl), UcodeSpl: max(a.UcodeSpl, b.UcodeSpl),
		Spl4: max(a.Spl4, b.Spl4), Spl5: max(a.Spl5, b.Spl5), Spl6: max(a.Spl6, b.Spl6), Spl7: max(a.Spl7, b.Spl7),
	}
}

// Verify checks a bundle (its CBOR bytes). The error is non-nil only when
// the bytes are not a bundle at all (wrapping attestation.ErrMalformed,
// ErrTooLarge or ErrUnsupportedProfile); a bundle that fails any check is a
// Result with Valid false and the reasons.
func (v *Verifier) Verify(bundle []byte) (*Result, error) {
	return v.verify(bundle, nil)
}

// VerifyOutput is Verify plus a check that SHA-256 of output is the
// attested outputDigest. output is the output as saved or as a copy of it
// (pretty-printed, re-escaped, members reordered): when its own bytes do
// not match and it is JSON, the bytes [acds.OutputBytes] recovers from it
// are checked, the rule POST /v1/verify applies too.
func (v *Verifier) VerifyOutput(bundle, output []byte) (*Result, error) {
	if output == nil {
		output = []byte{}
	}
	return v.verify(bundle, output)
}

// ErrNotMadeByNew is returned (wrapping ErrPolicy) by a Verifier that was
// not made by New: a zero or nil *Verifier.
var ErrNotMadeByNew = fmt.Errorf("%w: the Verifier was not made by verify.New", ErrPolicy)

// made reports whether v was made by New.
func (v *Verifier) made() bool { return v != nil && v.cache != nil }

func (v *Verifier) verify(data, output []byte) (*Result, error) {
	if !v.made() {
		return nil, ErrNotMadeByNew
	}
	b, err := attestation.ParseBundle(data)
	if err != nil {
		return nil, fmt.Errorf("not an attestation bundle: %w", err)
	}
	now := v.p.Now()
	r := &Result{Profile: b.Boot.Profile, VerifiedAt: now, Boot: &b.Boot}

	// The boot key's signature first: the claims' issue time is when the
	// certificates must have been valid.
	sigOK := false
	if pub, err := b.Boot.SigningPublicKey(); err != nil {
		r.fail(CheckSignature, fmt.Errorf("%w: %w", ErrSignature, err))
	} else if c, err := attestation.VerifyClaims(b.Statement, pub); err != nil {
		r.fail(CheckSignature, fmt.Errorf("%w: %w", ErrSignature, err))
	} else {
		r.Claims, sigOK = c, true
	}
	checkVersion(b, r.Claims, r)
	at := now
	if r.Claims != nil {
		at = r.Claims.IssuedAt
	}

	teeOK := false
	if raw, err := b.Boot.Marshal(); err != nil {
		r.fail(CheckStructure, fmt.Errorf("%w: boot evidence: %w", ErrInconsistent, err))
	} else {
		teeOK, _ = v.checkEvidence(raw, &b.Boot, at, now, r)
	}
	r.TEEQuoteVerified = teeOK && sigOK
	r.EnclaveHashMatch = v.checkMeasurement(teeOK, r)

	mpcApplies := false
	if c := r.Claims; c != nil {
		if c.IssuedAt.After(now.Add(v.p.ClockSkew)) {
			r.fail(CheckTime, fmt.Errorf("%w: issued at %s, in the future", ErrTime, c.IssuedAt.Format(time.RFC3339)))
		}
		if v.p.MaxAge > 0 && now.Sub(c.IssuedAt) > v.p.MaxAge {
			r.fail(CheckTime, fmt.Errorf("%w: issued at %s, older than %s", ErrTime, c.IssuedAt.Format(time.RFC3339), v.p.MaxAge))
		}
		switch c.Source.Kind {
		case acds.SourceRaw:
			if len(b.NotaryStatements) > 0 {
				r.fail(CheckStructure, fmt.Errorf("%w: raw source with %d notary statements", ErrInconsistent, len(b.NotaryStatements)))
			}
		case acds.SourceMPCTLS:
			mpcApplies = true
			r.MPCTLSVerified = v.checkNotary(b, c, r)
		}
		if output != nil {
			r.OutputChecked = true
			if d := outputDigest(output, c.OutputDigest); d != c.OutputDigest {
				r.fail(CheckOutput, fmt.Errorf("%w: output is %s, attested %s", ErrOutputDigest, d, c.OutputDigest))
			}
		}
	}
	v.checkManifest(now, r)
	r.Valid = r.TEEQuoteVerified && r.EnclaveHashMatch && (!mpcApplies || r.MPCTLSVerified) && len(r.Failures) == 0
	return r, nil
}

// VerifyBoot checks boot evidence alone (what GET /v1/attestation serves and
// an attested-TLS certificate carries): the evidence under the policy at the
// clock, its binding of the boot keys, and the measurement. Valid means
// TEEQuoteVerified and EnclaveHashMatch; Result.Boot holds the bound keys
// (shared with other Results of the same evidence: do not modify it).
// The error is non-nil only when the bytes are not boot evidence.
func (v *Verifier) VerifyBoot(boot []byte) (*Result, error) {
	if !v.made() {
		return nil, ErrNotMadeByNew
	}
	now := v.p.Now()
	r := &Result{VerifiedAt: now}
	ok, err := v.checkEvidence(boot, nil, now, now, r)
	if err != nil {
		return nil, fmt.Errorf("not boot evidence: %w", err)
	}
	r.TEEQuoteVerified = ok
	r.EnclaveHashMatch = v.checkMeasurement(r.TEEQuoteVerified, r)
	v.checkManifest(now, r)
	r.Valid = r.TEEQuoteVerified && r.EnclaveHashMatch && len(r.Failures) == 0
	return r, nil
}

// checkEvidence verifies boot evidence (raw: its deterministic encoding;
// parsed: the same parsed, or nil to parse raw on a cache miss) at time at
// and its binding of the boot keys, through the verifier's cache of
// verified evidence keyed by SHA-256 of raw. It records the boot evidence
// (when r has none), failures and relaxations in r and reports whether
// everything passed; the error is non-nil only when raw does not parse.
func (v *Verifier) checkEvidence(raw []byte, parsed *attestation.BootEvidence, at, now time.Time, r *Result) (bool, error) {
	var parseErr error
	e, f := v.cache.do(sha256.Sum256(raw), at, func() (*verified, bool, *Failure) {
		boot := parsed
		if boot == nil {
			if boot, parseErr = attestation.ParseBootEvidence(raw); parseErr != nil {
				return nil, false, nil
			}
		}
		return v.verifyEvidence(boot, at)
	})
	if parseErr != nil {
		return false, parseErr
	}
	if r.Boot == nil {
		r.Boot = e.boot
	}
	r.Profile = r.Boot.Profile
	r.Measurement = e.measurement
	r.Relaxations = append(r.Relaxations, e.relaxations...)
	if f != nil {
		r.Failures = append(r.Failures, f)
		return false, nil
	}
	r.CertificatesValidNow = e.validAt(now)
	return true, nil
}

// verifyEvidence checks that boot's profile is supported and allowed, its
// evidence verifies at time at, and it binds the boot keys and nonce. It
// returns what it found (always non-nil: the boot evidence, the
// relaxations that applied, the measurement once known), whether the
// outcome may be cached, and the failure.
func (v *Verifier) verifyEvidence(boot *attestation.BootEvidence, at time.Time) (*verified, bool, *Failure) {
	e := &verified{boot: boot}
	failed := func(c Check, err error) (*verified, bool, *Failure) {
		return e, false, &Failure{Check: c, Err: err}
	}
	evidenceFailed := func(err error) (*verified, bool, *Failure) {
		return failed(CheckEvidence, fmt.Errorf("%w: %w", ErrEvidence, err))
	}
	switch boot.Profile {
	case attestation.ProfileSEVSNP, attestation.ProfileTDX, attestation.ProfileTPM:
	case attestation.ProfileSEVSNPSim:
		if !v.p.UnsafeAllowSimulation {
			return failed(CheckProfile, fmt.Errorf("%w: a %s bundle proves the code path, not hardware", ErrSimulation, boot.Profile))
		}
		e.relaxations = append(e.relaxations, "simulated SEV-SNP accepted (UnsafeAllowSimulation): proves the code path, not hardware")
	default:
		return failed(CheckProfile, fmt.Errorf("%w: %s", ErrUnsupported, boot.Profile))
	}
	want := boot.ReportData()
	ve, err := v.kinds[boot.Profile].VerifyEvidence(boot.Evidence, attestation.EvidenceOptions{Now: at, ReportData: &want, AllowDebug: v.p.UnsafeAllowDebug})
	if errors.Is(err, attestation.ErrReportData) {
		return failed(CheckBinding, fmt.Errorf("%w: report data is not SHA-512 of the bundle's boot keys and nonce: %w", ErrBinding, err))
	}
	if err != nil {
		return evidenceFailed(err)
	}
	for _, x := range ve.Relaxations {
		if boot.Profile == attestation.ProfileSEVSNPSim && v.p.UnsafeTrustBundleSimulatedRoot {
			x += " (UnsafeTrustBundleSimulatedRoot)" // the switch that let the carried root in
		}
		e.relaxations = append(e.relaxations, x)
	}
	if ve.Debug {
		e.relaxations = append(e.relaxations, "debuggable guest accepted (UnsafeAllowDebug)")
	}
	e.measurement, e.notBefore, e.notAfter = ve.Measurement, ve.NotBefore, ve.NotAfter
	// Collateral has validity windows of its own that the chain's does not
	// include: such tdx outcomes are not reused.
	keep := boot.Profile != attestation.ProfileTDX || v.p.TDXCollateral == nil
	return e, keep, nil
}

// checkManifest records a failure when the policy's manifest is not valid
// at now.
func (v *Verifier) checkManifest(now time.Time, r *Result) {
	if m := v.p.Manifest; m != nil {
		if err := m.ValidAt(now); err != nil {
			r.fail(CheckManifest, fmt.Errorf("%w: %w", ErrManifest, err))
		}
	}
}

// checkMeasurement compares the authenticated measurement with the
// policy's reference values and the claims.
func (v *Verifier) checkMeasurement(authenticated bool, r *Result) bool {
	allowed := v.measurements[r.Profile]
	if len(allowed) == 0 {
		r.fail(CheckMeasurement, fmt.Errorf("%w: %s", ErrNoReferenceHash, r.Profile))
		return false
	}
	if !authenticated {
		return false // the evidence failure says why
	}
	ok := false
	for _, m := range allowed {
		if bytes.Equal(m, r.Measurement) {
			ok = true
			break
		}
	}
	if !ok {
		r.fail(CheckMeasurement, fmt.Errorf("%w: the enclave's code hash %x is not one the policy allows for %s; expected %s", ErrMeasurement, r.Measurement, r.Profile, expected(allowed)))
		return false
	}
	if r.Claims != nil && !bytes.Equal(r.Claims.Measurement, r.Measurement) {
		r.fail(CheckMeasurement, fmt.Errorf("%w: claims name measurement %x, evidence %x", ErrMeasurement, r.Claims.Measurement, r.Measurement))
		return false
	}
	return true
}

// outputDigest is the digest of output that is compared with the attested
// one: of the bytes as given, or, when those do not match and output is
// JSON, of its canonical bytes (acds.OutputBytes).
func outputDigest(output []byte, attested string) string {
	d := attestation.Digest(output)
	if d == attested {
		return d
	}
	if canon, err := acds.OutputBytes(output); err == nil {
		return attestation.Digest(canon)
	}
	return d
}

// expected lists allowed code hashes for a reason: the one hash, or the
// first few of many, so a reader can compare them with what the server's
// ready line or `acds measure` printed.
func expected(allowed [][]byte) string {
	const show = 4
	if len(allowed) == 1 {
		return hex.EncodeToString(allowed[0])
	}
	hs := make([]string, 0, show)
	for _, m := range allowed[:min(len(allowed), show)] {
		hs = append(hs, hex.EncodeToString(m))
	}
	list := "one of " + strings.Join(hs, ", ")
	if len(allowed) > show {
		list += fmt.Sprintf(" (and %d more)", len(allowed)-show)
	}
	return list
}

// checkNotary verifies every notary statement the claims name.
func (v *Verifier) checkNotary(b *attestation.Bundle, c *attestation.Claims, r *Result) bool {
	trusted, relaxation := v.trustedNotaries(b, c)
	if relaxation != "" {
		r.Relaxations = append(r.Relaxations, relaxation)
	}
	sessions := c.Source.Sessions
	if len(sessions) != len(b.NotaryStatements) {
		r.fail(CheckNotary, fmt.Errorf("%w: claims name %d sessions, bundle carries %d statements", ErrNotary, len(sessions), len(b.NotaryStatements)))
		return false
	}
	ok := true
	for i, s := range sessions {
		stmt := b.NotaryStatements[i]
		if attestation.Digest(stmt) != s.StatementDigest {
			r.fail(CheckNotary, fmt.Errorf("%w: session %d: statement digest differs from the claims", ErrNotary, i))
			ok = false
			continue
		}
		host := s.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		exp := mpctls.Expect{
			SNI:       host,
			NotBefore: c.IssuedAt.Add(-v.p.SessionWindow - v.p.ClockSkew),
			NotAfter:  c.IssuedAt.Add(v.p.ClockSkew),
		}
		if _, err := mpctls.VerifyStatement(stmt, trusted, exp); err != nil {
			r.fail(CheckNotary, fmt.Errorf("%w: session %d (%s): %w", ErrNotary, i, s.Host, err))
			ok = false
		}
	}
	return ok
}
