package tdx

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/sha512"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"github.com/acds-project/acds/attestation"
	"math/big"
	"sync"
	"time"

	"crypto/x509"

	"github.com/google/go-tdx-guest/abi"
	"github.com/google/go-tdx-guest/pcs"
	pb "github.com/google/go-tdx-guest/proto/tdx"
	tdxverify "github.com/google/go-tdx-guest/verify"
)

// MaxQuoteSize bounds the quotes Verify accepts. A version 4 quote with its
// PCK certificate chain is about 5 KiB; the kernel's configfs buffer pads
// quotes with zeros to 8 KiB.
const MaxQuoteSize = 64 << 10

// Layout of a version 4 quote (Intel TDX DCAP Quote Generation Library and
// Quote Verification Library, "Quote Format"): 48-byte header, 584-byte TD
// quote body, then the signed data. The quote signature covers the first
// signedLen bytes exactly as they appear on the wire.
const (
	headerLen    = 48
	bodyLen      = 584
	signedLen    = headerLen + bodyLen
	quoteVersion = 4
	rtmrCount    = 4
	mrLen        = 48
)

// Certificate subject names Intel uses in the PCK chain (PCK certificate and
// CRL profile specification).
const (
	pckLeafCN        = "Intel SGX PCK Certificate"
	pckPlatformCACN  = "Intel SGX PCK Platform CA"
	pckProcessorCACN = "Intel SGX PCK Processor CA"
	rootCN           = "Intel SGX Root CA"
)

//go:embed intel_sgx_root_ca.pem
var intelRootPEM []byte

// intelRoot parses the embedded Intel SGX Root CA once. The value is never
// modified after parsing.
var intelRoot = sync.OnceValues(func() (*x509.Certificate, error) {
	certs, err := parsePEMCerts(intelRootPEM)
	if err != nil || len(certs) != 1 {
		return nil, fmt.Errorf("embedded Intel root: %v", err)
	}
	return certs[0], nil
})

// IntelRoots returns a new pool holding the Intel SGX Root CA embedded in
// this package (the root that signs every PCK and TCB signing certificate;
// valid 2018-05-21 to 2049-12-31). Callers may add roots to the returned pool.
func IntelRoots() *x509.CertPool {
	pool := x509.NewCertPool()
	if root, err := intelRoot(); err == nil {
		pool.AddCert(root)
	}
	return pool
}

// Options configure Verify. The zero value verifies against the embedded
// Intel root at the current time and does not evaluate the TCB.
type Options struct {
	// Roots are the trusted root certificates for the PCK chain and the
	// collateral issuer chain. Nil means IntelRoots().
	Roots *x509.CertPool
	// Now is the clock used for certificate and collateral validity. Nil
	// means time.Now.
	Now func() time.Time
	// Collateral, when non-nil, is checked against the quote: the TCB info
	// and QE identity must be signed by an Intel TCB signing certificate
	// chaining to Roots, be current at Now, describe this platform and
	// quoting enclave, and a TCB level must match. Nil means the TCB is not
	// evaluated (Evidence.TCB.Evaluated is false and NotChecked says so).
	// Nothing is ever fetched from the network.
	Collateral *Collateral
}

// Measurement is a TEE measurement (a code hash). It prints as lower-case hex.
type Measurement []byte

// String returns the measurement as lower-case hex.
func (m Measurement) String() string { return hex.EncodeToString(m) }

// MeasurementOf returns the composite TDX measurement used by this package:
//
//	SHA-384(MRTD ‖ RTMR[0] ‖ RTMR[1] ‖ RTMR[2] ‖ RTMR[3])
//
// over the raw 48-byte registers as they appear in the TD quote body. MRTD
// covers the initial TD image (TDVF firmware); the RTMRs cover what the
// firmware, boot loader, kernel and command line measured at run time, so the
// composite changes when any of them does. Reference-value manifests list
// this value; Evidence also carries the individual registers.
func MeasurementOf(mrtd []byte, rtmrs [4][]byte) Measurement {
	h := sha512.New384()
	h.Write(mrtd)
	for _, r := range rtmrs {
		h.Write(r)
	}
	return h.Sum(nil)
}

// TCB describes the TCB evaluation against collateral.
type TCB struct {
	// Evaluated is true when collateral was supplied and checked.
	Evaluated bool
	// Status of the matching platform TCB level ("UpToDate", "OutOfDate",
	// "SWHardeningNeeded", …) from the TCB info.
	Status string
	// ModuleStatus is the status of the matching TDX module identity level
	// when the TEE TCB SVN names a TDX module version (TEE_TCB_SVN[1] > 0),
	// otherwise empty.
	ModuleStatus string
	// QEStatus is the status of the quoting enclave's level in the QE identity.
	QEStatus string
	// Date is the tcbDate of the matching platform level.
	Date string
	// AdvisoryIDs lists Intel security advisories of the matching levels.
	AdvisoryIDs []string
	// EvaluationDataNumber is the TCB info's tcbEvaluationDataNumber.
	EvaluationDataNumber int
}

// Evidence is what a verified quote attests. Only Verify creates it.
type Evidence struct {
	// Measurement is MeasurementOf(MRTD, RTMR).
	Measurement Measurement
	// MRTD is the measurement of the initial TD contents (48 bytes).
	MRTD []byte
	// RTMR are the four run-time measurement registers (48 bytes each).
	RTMR [4][]byte
	// ReportData is the 64 bytes the TD asked to be bound into the quote.
	ReportData [64]byte
	// MRSeam and MRSignerSeam identify the TDX module.
	MRSeam, MRSignerSeam []byte
	// MRConfigID, MROwner and MROwnerConfig are the host-provided identities.
	MRConfigID, MROwner, MROwnerConfig []byte
	// TDAttributes and XFAM as little-endian integers.
	TDAttributes, XFAM uint64
	// Debug is TDATTRIBUTES.DEBUG: the host can read and change TD memory.
	Debug bool
	// TEETCBSVN is the TEE TCB security version array of the TD quote body.
	TEETCBSVN [16]byte
	// QESVN and PCESVN are the quoting and provisioning enclave SVNs from the
	// header.
	QESVN, PCESVN uint16
	// FMSPC and PCEID come from the PCK certificate's SGX extensions.
	FMSPC, PCEID string
	// PCKCertificate is the verified PCK leaf certificate.
	PCKCertificate *x509.Certificate
	// NotBefore and NotAfter bound the time in which every certificate of
	// the verified PCK chain (leaf to root) is valid. Collateral has
	// windows of its own that they do not include.
	NotBefore, NotAfter time.Time
	// TCB is the TCB evaluation; TCB.Evaluated is false without collateral.
	TCB TCB
	// Checked lists the checks that passed, in order.
	Checked []Check
	// NotChecked says what was not checked and why.
	NotChecked []string
	// TrailingBytes counts the bytes after the signed data. No signature
	// covers them; Verify ignores them (kernels pad quotes with zeros).
	TrailingBytes int
	// VerifiedAt is the clock value the certificates and collateral were
	// checked at.
	VerifiedAt time.Time
}

// Verify checks a raw TDX version 4 quote offline: its layout, the PCK
// certificate chain up to a trusted Intel root at the verification time, the
// quote signature by the attestation key, the QE report signature by the PCK
// key and the QE report's binding of the attestation key; then, when
// opts.Collateral is set, the TCB info and QE identity.
//
// Verify does not check what the quote says (MRTD, RTMRs, report data, debug,
// TCB status against a minimum): that is Validate's job. It checks
// certificate revocation only when opts.Collateral carries the CRLs
// (NotChecked says so otherwise) and never touches the network. On failure the error is an *Error naming the
// check.
func Verify(quote []byte, opts Options) (*Evidence, error) {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	at := now()
	roots := opts.Roots
	if roots == nil {
		roots = IntelRoots()
	}
	if len(quote) > MaxQuoteSize {
		return nil, fail(CheckSize, ErrMalformed, "quote is %d bytes, limit %d", len(quote), MaxQuoteSize)
	}
	if len(quote) < signedLen+4 {
		return nil, fail(CheckSize, ErrMalformed, "quote is %d bytes, shorter than header and body", len(quote))
	}
	if v := binary.LittleEndian.Uint16(quote[0:2]); v != quoteVersion {
		return nil, fail(CheckTEEType, ErrMalformed, "quote version %d, want %d", v, quoteVersion)
	}
	if err := checkLayout(quote); err != nil {
		return nil, fail(CheckParse, ErrMalformed, "%w", err)
	}
	anyQuote, err := parseQuote(quote)
	if err != nil {
		return nil, fail(CheckParse, ErrMalformed, "%v", err)
	}
	q, ok := anyQuote.(*pb.QuoteV4)
	if !ok {
		return nil, fail(CheckParse, ErrMalformed, "unsupported quote type %T", anyQuote)
	}
	if tt := q.GetHeader().GetTeeType(); tt != abi.TeeTDX {
		return nil, fail(CheckTEEType, ErrMalformed, "TEE type %#x, want TDX (%#x)", tt, abi.TeeTDX)
	}
	ev := &Evidence{VerifiedAt: at}
	ev.Checked = append(ev.Checked, CheckSize, CheckParse, CheckTEEType)

	// PCK certificate chain.
	path, err := verifyPCKChain(q, roots, at)
	if err != nil {
		return nil, err
	}
	pck := path[0]
	ev.PCKCertificate = pck
	ev.NotBefore, ev.NotAfter = attestation.CertificatesWindow(path...)
	ev.Checked = append(ev.Checked, CheckPCKChain)

	signed := q.GetSignedData()
	// Quote signature: the attestation key signs header ‖ body.
	akBytes := signed.GetEcdsaAttestationKey()
	ak, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append([]byte{4}, akBytes...))
	if err != nil {
		return nil, fail(CheckQuoteSignature, ErrSignature, "attestation key is not a P-256 point: %v", err)
	}
	digest := sha256.Sum256(quote[:signedLen])
	if !verifyRaw(ak, digest[:], signed.GetSignature()) {
		return nil, fail(CheckQuoteSignature, ErrSignature, "attestation key signature over header and TD quote body does not verify")
	}
	ev.Checked = append(ev.Checked, CheckQuoteSignature)

	// QE report signature by the PCK key.
	qeCert := signed.GetCertificationData().GetQeReportCertificationData()
	qeReport, err := abi.EnclaveReportToAbiBytes(qeCert.GetQeReport())
	if err != nil {
		return nil, fail(CheckQEReportSignature, ErrMalformed, "QE report: %v", err)
	}
	pckKey, ok := pck.PublicKey.(*ecdsa.PublicKey)
	if !ok || pckKey.Curve != elliptic.P256() {
		return nil, fail(CheckPCKChain, ErrCertificate, "PCK certificate key is not ECDSA P-256")
	}
	qeDigest := sha256.Sum256(qeReport)
	if !verifyRaw(pckKey, qeDigest[:], qeCert.GetQeReportSignature()) {
		return nil, fail(CheckQEReportSignature, ErrSignature, "PCK key signature over the QE report does not verify")
	}
	ev.Checked = append(ev.Checked, CheckQEReportSignature)

	// QE report data = SHA-256(attestation key ‖ QE auth data) ‖ 32 zero bytes.
	bind := sha256.New()
	bind.Write(akBytes)
	bind.Write(qeCert.GetQeAuthData().GetData())
	want := append(bind.Sum(nil), make([]byte, 32)...)
	if !bytes.Equal(qeCert.GetQeReport().GetReportData(), want) {
		return nil, fail(CheckQEReportData, ErrSignature, "QE report data does not bind the attestation key")
	}
	ev.Checked = append(ev.Checked, CheckQEReportData)

	fillBody(ev, q)
	exts, err := pcs.PckCertificateExtensions(pck)
	if err != nil {
		return nil, fail(CheckPCKChain, ErrCertificate, "PCK certificate SGX extensions: %v", err)
	}
	ev.FMSPC, ev.PCEID = exts.FMSPC, exts.PCEID

	c := opts.Collateral
	if c == nil {
		c = &Collateral{}
	}
	if len(c.TCBInfo) > 0 || len(c.QEIdentity) > 0 {
		if err := checkCollateral(ev, q, exts, c, roots, at); err != nil {
			return nil, err
		}
	} else {
		ev.NotChecked = append(ev.NotChecked,
			"tcb-info: no collateral supplied, TCB status not evaluated",
			"qe-identity: no collateral supplied, quoting enclave identity not checked")
	}
	if len(c.PCKCRL) > 0 || len(c.RootCRL) > 0 {
		if err := checkCRL(c.PCKCRL, "PCK CRL", path[1], path[0], at); err != nil {
			return nil, err
		}
		if err := checkCRL(c.RootCRL, "root CA CRL", path[2], path[1], at); err != nil {
			return nil, err
		}
		ev.Checked = append(ev.Checked, CheckRevocation)
	} else {
		ev.NotChecked = append(ev.NotChecked, "revocation: no CRLs supplied, PCK certificate revocation not checked")
	}
	if extra := q.GetExtraBytes(); len(extra) > 0 {
		ev.TrailingBytes = len(extra)
		what := "zero padding"
		if !allZero(extra) {
			what = "not zero padding"
		}
		ev.NotChecked = append(ev.NotChecked, fmt.Sprintf("trailing bytes: %d bytes after the signed data (%s) are covered by no signature and ignored", len(extra), what))
	}
	return ev, nil
}

// checkLayout bounds-checks every length field of a version 4 quote before
// go-tdx-guest's abi parser (which slices without checking) sees it.
func checkLayout(q []byte) error {
	const (
		authFixed = 64 + 64 + 2 + 4 // signature, attestation key, cert data type and size
		qeFixed   = 384 + 64 + 2    // QE report, its signature, auth data size
		pckFixed  = 2 + 4           // PCK cert data type and size
	)
	size := binary.LittleEndian.Uint32(q[signedLen : signedLen+4])
	signed := q[signedLen+4:]
	if uint64(size) > uint64(len(signed)) {
		return fmt.Errorf("signed data size %d exceeds the %d bytes present", size, len(signed))
	}
	signed = signed[:size]
	if len(signed) < authFixed {
		return fmt.Errorf("signed data is %d bytes, shorter than its fixed part", len(signed))
	}
	certSize := binary.LittleEndian.Uint32(signed[130:134])
	cert := signed[authFixed:]
	if uint64(certSize) != uint64(len(cert)) {
		return fmt.Errorf("certification data size %d, %d bytes present", certSize, len(cert))
	}
	if len(cert) < qeFixed {
		return fmt.Errorf("QE certification data is %d bytes, shorter than its fixed part", len(cert))
	}
	auth := int(binary.LittleEndian.Uint16(cert[qeFixed-2 : qeFixed]))
	rest := cert[qeFixed:]
	if auth > len(rest) || len(rest)-auth < pckFixed {
		return fmt.Errorf("QE auth data size %d leaves no room for the PCK certificate chain", auth)
	}
	pck := rest[auth:]
	if pckSize := binary.LittleEndian.Uint32(pck[2:6]); uint64(pckSize) != uint64(len(pck)-pckFixed) {
		return fmt.Errorf("PCK certificate chain size %d, %d bytes present", pckSize, len(pck)-pckFixed)
	}
	return nil
}

// parseQuote runs go-tdx-guest's ABI parser, turning a panic on input that
// checkLayout did not foresee into an error.
func parseQuote(quote []byte) (q any, err error) {
	defer func() {
		if r := recover(); r != nil {
			q, err = nil, fmt.Errorf("quote parser failed: %v", r)
		}
	}()
	return abi.QuoteToProto(quote)
}

func fillBody(ev *Evidence, q *pb.QuoteV4) {
	b := q.GetTdQuoteBody()
	ev.MRTD = clone(b.GetMrTd())
	for i := range rtmrCount {
		if i < len(b.GetRtmrs()) {
			ev.RTMR[i] = clone(b.GetRtmrs()[i])
		}
	}
	copy(ev.ReportData[:], b.GetReportData())
	ev.MRSeam, ev.MRSignerSeam = clone(b.GetMrSeam()), clone(b.GetMrSignerSeam())
	ev.MRConfigID, ev.MROwner, ev.MROwnerConfig = clone(b.GetMrConfigId()), clone(b.GetMrOwner()), clone(b.GetMrOwnerConfig())
	ev.TDAttributes = le64(b.GetTdAttributes())
	ev.XFAM = le64(b.GetXfam())
	ev.Debug = ev.TDAttributes&1 != 0
	copy(ev.TEETCBSVN[:], b.GetTeeTcbSvn())
	ev.QESVN = uint16(le64(q.GetHeader().GetQeSvn()))
	ev.PCESVN = uint16(le64(q.GetHeader().GetPceSvn()))
	ev.Measurement = MeasurementOf(ev.MRTD, ev.RTMR)
}

// verifyPCKChain checks the PCK leaf and intermediate carried in the quote
// against the trusted roots at time at, and returns the verified path: leaf,
// PCK CA, root.
func verifyPCKChain(q *pb.QuoteV4, roots *x509.CertPool, at time.Time) ([]*x509.Certificate, error) {
	chain, err := tdxverify.ExtractChainFromQuote(q)
	if err != nil {
		return nil, fail(CheckPCKChain, ErrCertificate, "%v", err)
	}
	leaf, inter := chain.PCKCertificate, chain.IntermediateCertificate
	if leaf.Subject.CommonName != pckLeafCN {
		return nil, fail(CheckPCKChain, ErrCertificate, "leaf subject %q is not %q", leaf.Subject.CommonName, pckLeafCN)
	}
	if cn := inter.Subject.CommonName; cn != pckPlatformCACN && cn != pckProcessorCACN {
		return nil, fail(CheckPCKChain, ErrCertificate, "intermediate subject %q is not a PCK CA", cn)
	}
	chains, err := verifyCert(leaf, []*x509.Certificate{inter}, roots, at)
	if err != nil {
		return nil, fail(CheckPCKChain, ErrCertificate, "%w", err)
	}
	// The quote carries its root too; it must be the root the chain ended in.
	if got := chains[0][len(chains[0])-1]; !bytes.Equal(got.Raw, chain.RootCertificate.Raw) {
		return nil, fail(CheckPCKChain, ErrCertificate, "root certificate in the quote is not the trusted root the chain verified to")
	}
	if len(chains[0]) != 3 {
		return nil, fail(CheckPCKChain, ErrCertificate, "verified chain has %d certificates, want leaf, PCK CA and root", len(chains[0]))
	}
	return chains[0], nil
}

func verifyCert(leaf *x509.Certificate, intermediates []*x509.Certificate, roots *x509.CertPool, at time.Time) ([][]*x509.Certificate, error) {
	pool := x509.NewCertPool()
	for _, c := range intermediates {
		pool.AddCert(c)
	}
	chains, err := leaf.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: pool,
		CurrentTime:   at,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	if err != nil {
		return nil, err
	}
	for _, c := range chains[0] {
		if c.SignatureAlgorithm != x509.ECDSAWithSHA256 && c != chains[0][len(chains[0])-1] {
			return nil, fmt.Errorf("certificate %q is signed with %v, want ECDSA-SHA256", c.Subject.CommonName, c.SignatureAlgorithm)
		}
	}
	return chains, nil
}

// verifyRaw checks a 64-byte r ‖ s ECDSA signature.
func verifyRaw(pub *ecdsa.PublicKey, digest, sig []byte) bool {
	if len(sig) != 64 {
		return false
	}
	r := new(big.Int).SetBytes(sig[:32])
	s := new(big.Int).SetBytes(sig[32:])
	return ecdsa.Verify(pub, digest, r, s)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

func le64(b []byte) uint64 {
	var v [8]byte
	copy(v[:], b)
	return binary.LittleEndian.Uint64(v[:])
}
