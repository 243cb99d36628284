package tpm

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"fmt"
	"github.com/acds-project/acds/attestation"
	"slices"
	"time"

	attestpb "github.com/google/go-tpm-tools/proto/attest"
	tpmpb "github.com/google/go-tpm-tools/proto/tpm"
	"github.com/google/go-tpm-tools/server"
	"github.com/google/go-tpm/legacy/tpm2"
	"google.golang.org/protobuf/proto"
)

// MaxAttestationSize bounds the attestations Verify accepts. A real one is
// dominated by the TCG event log (typically 20 to 100 KiB).
const MaxAttestationSize = 1 << 20

// tpmGenerated is TPM_GENERATED_VALUE, the magic that starts every TPMS_ATTEST
// the TPM itself produced.
const tpmGenerated = 0xff544347

// DefaultPCRs returns the PCRs measured when Options.PCRs is nil: 0 to 9 of
// the SHA-256 bank. On a UEFI machine these cover the firmware code and
// configuration (0–3), the boot loader and what it loads (4–5), platform
// state and Secure Boot policy (6–7), and the boot loader's measurements of
// the kernel command line and the files it reads, including the kernel and
// initrd (8–9, GRUB).
func DefaultPCRs() []int { return []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9} }

// Options configure Verify. Exactly one trust mechanism must be set:
// TrustedAKs, or Roots; the zero value trusts nothing and fails closed.
type Options struct {
	// TrustedAKs pins attestation-key public keys (*ecdsa.PublicKey or
	// *rsa.PublicKey). The attestation's AK must equal one of them.
	TrustedAKs []crypto.PublicKey
	// Roots are trusted AK certificate issuers: the attestation must carry an
	// AK certificate that chains to one of them (through Intermediates or the
	// intermediates the attestation carries) at Now, for the AK it uses.
	Roots []*x509.Certificate
	// Intermediates are extra untrusted intermediates for the AK certificate.
	Intermediates []*x509.Certificate
	// PCRs is the set of SHA-256 PCR indices the measurement covers. Nil
	// means DefaultPCRs(). Every index must be in the quote.
	PCRs []int
	// Now is the clock for the AK certificate validity. Nil means time.Now.
	Now func() time.Time
}

// Measurement is a TEE measurement (a code hash). It prints as lower-case hex.
type Measurement []byte

// String returns the measurement as lower-case hex.
func (m Measurement) String() string { return hex.EncodeToString(m) }

// MeasurementOf returns the measurement of a PCR set as this package defines
// it:
//
//	SHA-256(PCR[i₁] ‖ PCR[i₂] ‖ … ‖ PCR[iₙ])
//
// over the 32-byte SHA-256-bank values of the selected indices in ascending
// order (duplicates removed). This is the TPM's own pcrDigest for a quote
// selecting exactly those PCRs of the SHA-256 bank, so `tpm2_quote -l
// sha256:0,1,…,9` prints the same value. It returns nil if a selected PCR is
// missing or not 32 bytes.
func MeasurementOf(pcrs map[uint32][]byte, selection []int) Measurement {
	sel := slices.Clone(selection)
	slices.Sort(sel)
	sel = slices.Compact(sel)
	h := sha256.New()
	for _, i := range sel {
		v, ok := pcrs[uint32(i)]
		if i < 0 || !ok || len(v) != sha256.Size {
			return nil
		}
		h.Write(v)
	}
	return h.Sum(nil)
}

// Evidence is what a verified attestation says. Only Verify creates it.
type Evidence struct {
	// Measurement is MeasurementOf(PCRs, MeasuredPCRs).
	Measurement Measurement
	// MeasuredPCRs are the indices the measurement covers, ascending.
	MeasuredPCRs []int
	// PCRs holds every SHA-256 PCR value of the verified quote.
	PCRs map[uint32][]byte
	// Nonce is the quote's qualifying data (equal to the nonce given).
	Nonce []byte
	// AK is the attestation key that signed the quote.
	AK crypto.PublicKey
	// AKCertificate is the verified AK certificate when trust came from
	// Roots, nil when the AK was pinned.
	AKCertificate *x509.Certificate
	// NotBefore and NotAfter bound the time in which every certificate of
	// the verified AK chain is valid; both are zero when the AK was pinned
	// (no certificate, no window).
	NotBefore, NotAfter time.Time
	// FirmwareVersion is the TPM vendor's firmware version from the quote.
	FirmwareVersion uint64
	// MachineState is what go-tpm-tools' server package extracted from the
	// replayed event log (platform, Secure Boot, …).
	MachineState *attestpb.MachineState
	// Checked lists the checks that passed, in order.
	Checked []Check
	// NotChecked says what was not checked and why.
	NotChecked []string
	// VerifiedAt is the clock value used for the AK certificate.
	VerifiedAt time.Time
}

// Verify checks a go-tpm-tools attestation (as package device makes) offline: the
// AK is pinned or certified by Options, is a restricted signing key, signed
// the SHA-256-bank quote; the quote's qualifying data equals nonce; the PCR
// values carried with it hash to the quoted digest and include every PCR of
// the measurement; and go-tpm-tools' server.VerifyAttestation accepts it,
// which also replays the TCG event log against those PCRs.
//
// Verify says nothing about whether the measurement is a good one: compare
// Evidence.Measurement (or single PCRs) with reference values. It does not
// check TPM clock or reset counters and never touches the network. Errors
// are *Error values naming the failed check.
func Verify(att []byte, nonce []byte, opts Options) (*Evidence, error) {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	ev := &Evidence{VerifiedAt: now()}
	if len(att) > MaxAttestationSize {
		return nil, fail(CheckSize, ErrMalformed, "attestation is %d bytes, limit %d", len(att), MaxAttestationSize)
	}
	ev.Checked = append(ev.Checked, CheckSize)
	var a attestpb.Attestation
	if err := proto.Unmarshal(att, &a); err != nil {
		return nil, fail(CheckParse, ErrMalformed, "not an attestation: %v", err)
	}
	if (len(opts.TrustedAKs) == 0) == (len(opts.Roots) == 0) {
		return nil, fail(CheckTrust, ErrNoTrust, "set exactly one of TrustedAKs (%d) and Roots (%d)", len(opts.TrustedAKs), len(opts.Roots))
	}

	// The attestation key.
	akPub, err := safely(func() (tpm2.Public, error) { return tpm2.DecodePublic(a.GetAkPub()) })
	if err != nil {
		return nil, fail(CheckParse, ErrMalformed, "AK public area: %v", err)
	}
	ak, err := safely(akPub.Key)
	if err != nil {
		return nil, fail(CheckParse, ErrMalformed, "AK public key: %v", err)
	}
	const akAttrs = tpm2.FlagRestricted | tpm2.FlagSign | tpm2.FlagFixedTPM
	if akPub.Attributes&akAttrs != akAttrs {
		return nil, fail(CheckAK, ErrUntrustedAK, "AK attributes %#x lack restricted, sign or fixedTPM", uint32(akPub.Attributes))
	}
	if len(opts.TrustedAKs) > 0 {
		if !slices.ContainsFunc(opts.TrustedAKs, func(k crypto.PublicKey) bool { return sameKey(k, ak) }) {
			return nil, fail(CheckAK, ErrUntrustedAK, "AK is not one of the %d pinned keys", len(opts.TrustedAKs))
		}
	} else {
		cert, chain, err := verifyAKCert(&a, ak, opts, ev.VerifiedAt)
		if err != nil {
			return nil, err
		}
		ev.AKCertificate = cert
		ev.NotBefore, ev.NotAfter = attestation.CertificatesWindow(chain...)
	}
	ev.AK = ak
	ev.Checked = append(ev.Checked, CheckParse, CheckTrust, CheckAK)

	// The SHA-256 quote: signature, nonce, PCR digest.
	q := sha256Quote(a.GetQuotes())
	if q == nil {
		return nil, fail(CheckParse, ErrMalformed, "no quote over the SHA-256 PCR bank")
	}
	data, err := safely(func() (*tpm2.AttestationData, error) { return tpm2.DecodeAttestationData(q.GetQuote()) })
	if err != nil {
		return nil, fail(CheckParse, ErrMalformed, "TPMS_ATTEST: %v", err)
	}
	if err := verifySignature(ak, q.GetQuote(), q.GetRawSig()); err != nil {
		return nil, err
	}
	ev.Checked = append(ev.Checked, CheckQuoteSignature)
	if data.Magic != tpmGenerated || data.Type != tpm2.TagAttestQuote || data.AttestedQuoteInfo == nil {
		return nil, fail(CheckParse, ErrMalformed, "signed data is not a TPM-generated quote (magic %#x, tag %#x)", data.Magic, uint16(data.Type))
	}
	if subtle.ConstantTimeCompare(data.ExtraData, nonce) != 1 {
		return nil, fail(CheckNonce, ErrNonce, "quote was made over nonce %x, want %x", []byte(data.ExtraData), nonce)
	}
	ev.Nonce = slices.Clone(nonce)
	ev.FirmwareVersion = data.FirmwareVersion
	ev.Checked = append(ev.Checked, CheckNonce)
	if err := checkPCRDigest(data.AttestedQuoteInfo, q.GetPcrs()); err != nil {
		return nil, err
	}
	ev.Checked = append(ev.Checked, CheckPCRDigest)

	ev.PCRs = make(map[uint32][]byte, len(q.GetPcrs().GetPcrs()))
	for i, v := range q.GetPcrs().GetPcrs() {
		ev.PCRs[i] = slices.Clone(v)
	}
	sel := opts.PCRs
	if sel == nil {
		sel = DefaultPCRs()
	}
	if len(sel) == 0 {
		return nil, fail(CheckPCRSelection, ErrPCR, "the measurement must cover at least one PCR")
	}
	ev.MeasuredPCRs = slices.Compact(slices.Sorted(slices.Values(sel)))
	for _, i := range ev.MeasuredPCRs {
		if _, ok := ev.PCRs[uint32(i)]; i < 0 || !ok {
			return nil, fail(CheckPCRSelection, ErrPCR, "PCR %d is not in the quote", i)
		}
	}
	ev.Measurement = MeasurementOf(ev.PCRs, ev.MeasuredPCRs)
	ev.Checked = append(ev.Checked, CheckPCRSelection)

	// go-tpm-tools' own verification, which also replays the event log.
	ms, err := safely(func() (*attestpb.MachineState, error) {
		return server.VerifyAttestation(&a, server.VerifyOpts{
			Nonce:      nonce,
			TrustedAKs: []crypto.PublicKey{ak},
			HashAlgo:   tpm2.AlgSHA256,
		})
	})
	if err != nil {
		return nil, fail(CheckEventLog, ErrEventLog, "%w", err)
	}
	ev.MachineState = ms
	ev.Checked = append(ev.Checked, CheckEventLog)
	ev.NotChecked = append(ev.NotChecked,
		"reference values: the measurement is reported, not compared",
		"tpm clock and reset counters: not checked",
		"revocation: AK certificate revocation is not consulted")
	return ev, nil
}

func sha256Quote(qs []*tpmpb.Quote) *tpmpb.Quote {
	for _, q := range qs {
		if tpm2.Algorithm(q.GetPcrs().GetHash()) == tpm2.AlgSHA256 {
			return q
		}
	}
	return nil
}

func verifySignature(ak crypto.PublicKey, quoted, rawSig []byte) error {
	sig, err := safely(func() (*tpm2.Signature, error) { return tpm2.DecodeSignature(bytes.NewBuffer(rawSig)) })
	if err != nil {
		return fail(CheckQuoteSignature, ErrSignature, "signature encoding: %v", err)
	}
	var alg tpm2.Algorithm
	switch {
	case sig.ECC != nil:
		alg = sig.ECC.HashAlg
	case sig.RSA != nil:
		alg = sig.RSA.HashAlg
	}
	if alg != tpm2.AlgSHA256 && alg != tpm2.AlgSHA384 && alg != tpm2.AlgSHA512 {
		return fail(CheckQuoteSignature, ErrSignature, "signature hash %v is not SHA-256, SHA-384 or SHA-512", alg)
	}
	h, err := alg.Hash()
	if err != nil {
		return fail(CheckQuoteSignature, ErrSignature, "signature hash: %v", err)
	}
	d := h.New()
	d.Write(quoted)
	digest := d.Sum(nil)
	switch pub := ak.(type) {
	case *ecdsa.PublicKey:
		if sig.Alg != tpm2.AlgECDSA || sig.ECC == nil || !ecdsa.Verify(pub, digest, sig.ECC.R, sig.ECC.S) {
			return fail(CheckQuoteSignature, ErrSignature, "ECDSA signature by the AK over the quote does not verify")
		}
	case *rsa.PublicKey:
		if sig.Alg != tpm2.AlgRSASSA || sig.RSA == nil {
			return fail(CheckQuoteSignature, ErrSignature, "signature scheme %v is not RSASSA", sig.Alg)
		}
		if err := rsa.VerifyPKCS1v15(pub, h, digest, sig.RSA.Signature); err != nil {
			return fail(CheckQuoteSignature, ErrSignature, "RSASSA signature by the AK over the quote does not verify")
		}
	default:
		return fail(CheckQuoteSignature, ErrSignature, "AK type %T is not supported", ak)
	}
	return nil
}

func checkPCRDigest(info *tpm2.QuoteInfo, pcrs *tpmpb.PCRs) error {
	if info.PCRSelection.Hash != tpm2.AlgSHA256 {
		return fail(CheckPCRDigest, ErrPCR, "quote selects bank %v, the PCRs carried are SHA-256", info.PCRSelection.Hash)
	}
	sel := slices.Sorted(slices.Values(info.PCRSelection.PCRs))
	if len(sel) != len(pcrs.GetPcrs()) {
		return fail(CheckPCRDigest, ErrPCR, "quote selects %d PCRs, %d values are carried", len(sel), len(pcrs.GetPcrs()))
	}
	h := sha256.New()
	for _, i := range sel {
		v, ok := pcrs.GetPcrs()[uint32(i)]
		if !ok || len(v) != sha256.Size {
			return fail(CheckPCRDigest, ErrPCR, "quoted PCR %d is missing or not a SHA-256 value", i)
		}
		h.Write(v)
	}
	if subtle.ConstantTimeCompare(h.Sum(nil), info.PCRDigest) != 1 {
		return fail(CheckPCRDigest, ErrPCR, "the PCR values carried do not hash to the quoted PCR digest")
	}
	return nil
}

var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

// verifyAKCert returns the AK certificate and the chain it verified with.
func verifyAKCert(a *attestpb.Attestation, ak crypto.PublicKey, opts Options, at time.Time) (*x509.Certificate, []*x509.Certificate, error) {
	if len(a.GetAkCert()) == 0 {
		return nil, nil, fail(CheckAK, ErrUntrustedAK, "trust comes from AK certificate roots, and the attestation carries no AK certificate")
	}
	cert, err := x509.ParseCertificate(a.GetAkCert())
	if err != nil {
		return nil, nil, fail(CheckAK, ErrUntrustedAK, "AK certificate: %v", err)
	}
	roots := x509.NewCertPool()
	for _, r := range opts.Roots {
		roots.AddCert(r)
	}
	inter := x509.NewCertPool()
	for _, c := range opts.Intermediates {
		inter.AddCert(c)
	}
	if n := len(a.GetIntermediateCerts()); n > 8 {
		return nil, nil, fail(CheckAK, ErrUntrustedAK, "%d intermediate certificates, limit 8", n)
	}
	for _, der := range a.GetIntermediateCerts() {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, nil, fail(CheckAK, ErrUntrustedAK, "intermediate certificate: %v", err)
		}
		inter.AddCert(c)
	}
	// TPM certificates put the TPM's identity in a critical subjectAltName
	// directoryName that crypto/x509 does not interpret; accept it as handled.
	cert.UnhandledCriticalExtensions = slices.DeleteFunc(slices.Clone(cert.UnhandledCriticalExtensions),
		func(o asn1.ObjectIdentifier) bool { return o.Equal(oidSubjectAltName) })
	chains, err := cert.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		CurrentTime:   at,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	if err != nil {
		return nil, nil, fail(CheckAK, ErrUntrustedAK, "AK certificate: %w", err)
	}
	if !sameKey(cert.PublicKey, ak) {
		return nil, nil, fail(CheckAK, ErrUntrustedAK, "AK certificate is for a different key than the AK that signed")
	}
	return cert, chains[0], nil
}

// safely runs a third-party decoder on untrusted bytes and turns a panic
// into an error: go-tpm's structure decoders and go-eventlog's event log
// extraction panic on some malformed input (found by
// TestVerifyRandomMutations).
func safely[T any](f func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			var zero T
			v, err = zero, fmt.Errorf("decoder panicked on malformed input: %v", r)
		}
	}()
	return f()
}

func sameKey(a, b crypto.PublicKey) bool {
	x, err1 := x509.MarshalPKIXPublicKey(a)
	y, err2 := x509.MarshalPKIXPublicKey(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// String makes an Evidence summary for logs and test failures.
func (ev *Evidence) String() string {
	return fmt.Sprintf("tpm evidence: measurement %s over PCRs %v", ev.Measurement, ev.MeasuredPCRs)
}
