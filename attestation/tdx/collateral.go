package tdx

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-tdx-guest/pcs"
	pb "github.com/google/go-tdx-guest/proto/tdx"
)

// MaxCollateralSize bounds each part of the Collateral.
const MaxCollateralSize = 256 << 10

// Collateral is Intel PCS collateral for one platform, as served by the
// Intel Provisioning Certification Service (TDX API v4). The caller obtains
// it (a verifier in CI typically ships it next to the evidence); this package
// only checks it and never fetches anything.
type Collateral struct {
	// TCBInfo is the response body of /tdx/certification/v4/tcb?fmspc=…:
	// {"tcbInfo":{…},"signature":"<hex r‖s>"}.
	TCBInfo []byte
	// QEIdentity is the response body of /tdx/certification/v4/qe/identity:
	// {"enclaveIdentity":{…},"signature":"<hex r‖s>"}.
	QEIdentity []byte
	// IssuerChain is the PEM chain from the TCB-Info-Issuer-Chain (or
	// SGX-Enclave-Identity-Issuer-Chain) response header, URL-decoded: the
	// "Intel SGX TCB Signing" certificate, then the Intel root.
	IssuerChain []byte
	// PCKCRL is the DER CRL of the PCK CA that issued the quote's PCK
	// certificate (/sgx/certification/v4/pckcrl?ca=platform|processor&encoding=der).
	// RootCRL is the DER CRL of the Intel SGX Root CA
	// (https://certificates.trustedservices.intel.com/IntelSGXRootCA.der).
	// When either is set both are required: each must be signed by its CA,
	// current at the verification time, and not list the PCK certificate or
	// the PCK CA certificate respectively. Both nil: revocation is not
	// checked (Evidence.NotChecked says so).
	PCKCRL, RootCRL []byte
}

const (
	tcbSigningCN      = "Intel SGX TCB Signing"
	tcbInfoID         = "TDX"
	tcbInfoVersion    = 3
	qeIdentityID      = "TD_QE"
	qeIdentityVersion = 2
)

type signedTCBInfo struct {
	TCBInfo   json.RawMessage `json:"tcbInfo"`
	Signature string          `json:"signature"`
}

type signedQEIdentity struct {
	EnclaveIdentity json.RawMessage `json:"enclaveIdentity"`
	Signature       string          `json:"signature"`
}

func checkCollateral(ev *Evidence, q *pb.QuoteV4, exts *pcs.PckExtensions, c *Collateral, roots *x509.CertPool, at time.Time) error {
	for name, b := range map[string][]byte{"TCB info": c.TCBInfo, "QE identity": c.QEIdentity, "issuer chain": c.IssuerChain, "PCK CRL": c.PCKCRL, "root CRL": c.RootCRL} {
		if len(b) > MaxCollateralSize {
			return fail(CheckTCBInfo, ErrCollateral, "%s is %d bytes, limit %d", name, len(b), MaxCollateralSize)
		}
	}
	signer, err := tcbSigner(c.IssuerChain, roots, at)
	if err != nil {
		return err
	}

	// TCB info: Intel's signature, freshness, and that it describes this platform.
	var sti signedTCBInfo
	if err := json.Unmarshal(c.TCBInfo, &sti); err != nil || len(sti.TCBInfo) == 0 {
		return fail(CheckTCBInfo, ErrCollateral, "TCB info is not a signed tcbInfo object: %v", err)
	}
	if err := verifyJSONSignature(signer, sti.TCBInfo, sti.Signature); err != nil {
		return fail(CheckTCBInfo, ErrSignature, "TCB info: %w", err)
	}
	var info pcs.TcbInfo
	if err := json.Unmarshal(sti.TCBInfo, &info); err != nil {
		return fail(CheckTCBInfo, ErrCollateral, "TCB info: %v", err)
	}
	if info.ID != tcbInfoID || info.Version != tcbInfoVersion {
		return fail(CheckTCBInfo, ErrCollateral, "TCB info is id %q version %d, want %q version %d", info.ID, info.Version, tcbInfoID, tcbInfoVersion)
	}
	if err := fresh(info.IssueDate, info.NextUpdate, at); err != nil {
		return fail(CheckTCBInfo, ErrCollateral, "TCB info: %w", err)
	}
	if !strings.EqualFold(info.Fmspc, exts.FMSPC) {
		return fail(CheckTCBInfo, ErrCollateral, "TCB info is for FMSPC %s, the PCK certificate says %s", info.Fmspc, exts.FMSPC)
	}
	if !strings.EqualFold(info.PceID, exts.PCEID) {
		return fail(CheckTCBInfo, ErrCollateral, "TCB info is for PCEID %s, the PCK certificate says %s", info.PceID, exts.PCEID)
	}
	body := q.GetTdQuoteBody()
	if !bytes.Equal(info.TdxModule.Mrsigner.Bytes, body.GetMrSignerSeam()) {
		return fail(CheckTCBInfo, ErrCollateral, "MRSIGNERSEAM %x is not the TDX module signer %x of the TCB info", body.GetMrSignerSeam(), info.TdxModule.Mrsigner.Bytes)
	}
	if !maskedEqual(body.GetSeamAttributes(), info.TdxModule.AttributesMask.Bytes, info.TdxModule.Attributes.Bytes) {
		return fail(CheckTCBInfo, ErrCollateral, "SEAM attributes %x do not match the TCB info", body.GetSeamAttributes())
	}
	ev.Checked = append(ev.Checked, CheckTCBInfo)

	// QE identity: Intel's signature, freshness, and that the QE report matches it.
	qeStatus, err := checkQEIdentity(c.QEIdentity, signer, q, at)
	if err != nil {
		return err
	}
	ev.Checked = append(ev.Checked, CheckQEIdentity)

	// TCB level of this platform and TDX module.
	tee := body.GetTeeTcbSvn()
	level, err := matchLevel(info.TcbLevels, exts.TCB.CPUSvnComponents, exts.TCB.PCESvn, tee)
	if err != nil {
		return fail(CheckTCBLevel, ErrTCB, "%w", err)
	}
	ev.TCB = TCB{
		Evaluated:            true,
		Status:               string(level.TcbStatus),
		QEStatus:             qeStatus,
		Date:                 level.TcbDate,
		AdvisoryIDs:          append([]string(nil), level.AdvisoryIDs...),
		EvaluationDataNumber: info.TcbEvaluationDataNumber,
	}
	if tee[1] > 0 {
		mod, err := matchModule(info.TdxModuleIdentities, body)
		if err != nil {
			return fail(CheckTCBLevel, ErrTCB, "%w", err)
		}
		ev.TCB.ModuleStatus = string(mod.TcbStatus)
		ev.TCB.AdvisoryIDs = append(ev.TCB.AdvisoryIDs, mod.AdvisoryIDs...)
	}
	ev.Checked = append(ev.Checked, CheckTCBLevel)
	return nil
}

func checkQEIdentity(raw []byte, signer *ecdsa.PublicKey, q *pb.QuoteV4, at time.Time) (string, error) {
	var sqi signedQEIdentity
	if err := json.Unmarshal(raw, &sqi); err != nil || len(sqi.EnclaveIdentity) == 0 {
		return "", fail(CheckQEIdentity, ErrCollateral, "QE identity is not a signed enclaveIdentity object: %v", err)
	}
	if err := verifyJSONSignature(signer, sqi.EnclaveIdentity, sqi.Signature); err != nil {
		return "", fail(CheckQEIdentity, ErrSignature, "QE identity: %w", err)
	}
	var id pcs.EnclaveIdentity
	if err := json.Unmarshal(sqi.EnclaveIdentity, &id); err != nil {
		return "", fail(CheckQEIdentity, ErrCollateral, "QE identity: %v", err)
	}
	if id.ID != qeIdentityID || id.Version != qeIdentityVersion {
		return "", fail(CheckQEIdentity, ErrCollateral, "QE identity is id %q version %d, want %q version %d", id.ID, id.Version, qeIdentityID, qeIdentityVersion)
	}
	if err := fresh(id.IssueDate, id.NextUpdate, at); err != nil {
		return "", fail(CheckQEIdentity, ErrCollateral, "QE identity: %w", err)
	}
	rep := q.GetSignedData().GetCertificationData().GetQeReportCertificationData().GetQeReport()
	var misc [4]byte
	binary.LittleEndian.PutUint32(misc[:], rep.GetMiscSelect())
	if !maskedEqual(misc[:], id.MiscselectMask.Bytes, id.Miscselect.Bytes) {
		return "", fail(CheckQEIdentity, ErrCollateral, "QE MISCSELECT %x does not match the QE identity", misc)
	}
	if !maskedEqual(rep.GetAttributes(), id.AttributesMask.Bytes, id.Attributes.Bytes) {
		return "", fail(CheckQEIdentity, ErrCollateral, "QE attributes %x do not match the QE identity", rep.GetAttributes())
	}
	if !bytes.Equal(rep.GetMrSigner(), id.Mrsigner.Bytes) {
		return "", fail(CheckQEIdentity, ErrCollateral, "QE MRSIGNER %x is not %x", rep.GetMrSigner(), id.Mrsigner.Bytes)
	}
	if rep.GetIsvProdId() != uint32(id.IsvProdID) {
		return "", fail(CheckQEIdentity, ErrCollateral, "QE ISVPRODID %d is not %d", rep.GetIsvProdId(), id.IsvProdID)
	}
	for _, l := range id.TcbLevels {
		if l.Tcb.Isvsvn <= rep.GetIsvSvn() {
			return string(l.TcbStatus), nil
		}
	}
	return "", fail(CheckQEIdentity, ErrTCB, "no QE identity TCB level covers QE ISVSVN %d", rep.GetIsvSvn())
}

// matchLevel selects the first (highest) TCB level whose SGX components and
// PCESVN are covered by the PCK certificate and whose TDX components are
// covered by the TEE TCB SVN. When TEE_TCB_SVN[1] (the TDX module major
// version) is non-zero, components 0 and 1 are judged by the TDX module
// identities instead, and the level's component 1 must equal it.
func matchLevel(levels []pcs.TcbLevel, cpuSvn []byte, pceSvn uint16, tee []byte) (*pcs.TcbLevel, error) {
	if len(levels) == 0 {
		return nil, errors.New("TCB info has no TCB levels")
	}
	if len(cpuSvn) != 16 || len(tee) != 16 {
		return nil, fmt.Errorf("CPUSVN has %d components and TEE TCB SVN %d, want 16 each", len(cpuSvn), len(tee))
	}
	start := 0
	if tee[1] > 0 {
		start = 2
	}
	for i := range levels {
		l := &levels[i]
		if len(l.Tcb.SgxTcbcomponents) != 16 || len(l.Tcb.TdxTcbcomponents) != 16 || pceSvn < l.Tcb.Pcesvn {
			continue
		}
		ok := true
		for j := range 16 {
			if cpuSvn[j] < l.Tcb.SgxTcbcomponents[j].Svn {
				ok = false
				break
			}
		}
		for j := start; ok && j < 16; j++ {
			if tee[j] < l.Tcb.TdxTcbcomponents[j].Svn {
				ok = false
			}
		}
		if !ok {
			continue
		}
		if tee[1] > 0 && l.Tcb.TdxTcbcomponents[1].Svn != tee[1] {
			return nil, fmt.Errorf("matching TCB level is for TDX module version %d, the platform runs %d", l.Tcb.TdxTcbcomponents[1].Svn, tee[1])
		}
		return l, nil
	}
	return nil, fmt.Errorf("no TCB level of the TCB info is covered by CPUSVN %x, PCESVN %d and TEE TCB SVN %x (TCB level not supported)", cpuSvn, pceSvn, tee)
}

func matchModule(ids []pcs.TdxModuleIdentity, body *pb.TDQuoteBody) (*pcs.TcbLevel, error) {
	tee := body.GetTeeTcbSvn()
	want := fmt.Sprintf("TDX_%02X", tee[1])
	for _, id := range ids {
		if !strings.EqualFold(id.ID, want) {
			continue
		}
		if !bytes.Equal(id.Mrsigner.Bytes, body.GetMrSignerSeam()) {
			return nil, fmt.Errorf("TDX module identity %s has signer %x, MRSIGNERSEAM is %x", id.ID, id.Mrsigner.Bytes, body.GetMrSignerSeam())
		}
		if !maskedEqual(body.GetSeamAttributes(), id.AttributesMask.Bytes, id.Attributes.Bytes) {
			return nil, fmt.Errorf("SEAM attributes %x do not match TDX module identity %s", body.GetSeamAttributes(), id.ID)
		}
		for i := range id.TcbLevels {
			if id.TcbLevels[i].Tcb.Isvsvn <= uint32(tee[0]) {
				return &id.TcbLevels[i], nil
			}
		}
		return nil, fmt.Errorf("no level of TDX module identity %s covers module SVN %d", id.ID, tee[0])
	}
	return nil, fmt.Errorf("TCB info has no TDX module identity %s", want)
}

// tcbSigner verifies the collateral issuer chain and returns the TCB signing key.
func tcbSigner(chainPEM []byte, roots *x509.CertPool, at time.Time) (*ecdsa.PublicKey, error) {
	certs, err := parsePEMCerts(chainPEM)
	if err != nil || len(certs) == 0 {
		return nil, fail(CheckTCBInfo, ErrCertificate, "collateral issuer chain: %v", err)
	}
	leaf := certs[0]
	if leaf.Subject.CommonName != tcbSigningCN {
		return nil, fail(CheckTCBInfo, ErrCertificate, "collateral signer %q is not %q", leaf.Subject.CommonName, tcbSigningCN)
	}
	if _, err := verifyCert(leaf, certs[1:], roots, at); err != nil {
		return nil, fail(CheckTCBInfo, ErrCertificate, "collateral signing certificate: %w", err)
	}
	key, ok := leaf.PublicKey.(*ecdsa.PublicKey)
	if !ok || key.Curve != elliptic.P256() {
		return nil, fail(CheckTCBInfo, ErrCertificate, "collateral signing key is not ECDSA P-256")
	}
	return key, nil
}

func verifyJSONSignature(key *ecdsa.PublicKey, body []byte, sigHex string) error {
	sig, err := hex.DecodeString(sigHex)
	if err != nil || len(sig) != 64 {
		return errors.New("signature is not 64 hex-encoded bytes")
	}
	d := sha256.Sum256(body)
	if !verifyRaw(key, d[:], sig) {
		return errors.New("signature by the Intel TCB signing key does not verify")
	}
	return nil
}

// checkCRL checks that der is a CRL signed by issuer, current at at, that does
// not revoke subject.
func checkCRL(der []byte, name string, issuer, subject *x509.Certificate, at time.Time) error {
	if len(der) == 0 {
		return fail(CheckRevocation, ErrCollateral, "%s missing: PCK and root CA CRLs are checked together", name)
	}
	if len(der) > MaxCollateralSize {
		return fail(CheckRevocation, ErrCollateral, "%s is %d bytes, limit %d", name, len(der), MaxCollateralSize)
	}
	crl, err := x509.ParseRevocationList(der)
	if err != nil {
		return fail(CheckRevocation, ErrCollateral, "%s: %v", name, err)
	}
	if err := crl.CheckSignatureFrom(issuer); err != nil {
		return fail(CheckRevocation, ErrCollateral, "%s is not signed by %q: %v", name, issuer.Subject.CommonName, err)
	}
	if err := fresh(crl.ThisUpdate, crl.NextUpdate, at); err != nil {
		return fail(CheckRevocation, ErrCollateral, "%s: %w", name, err)
	}
	for _, rc := range crl.RevokedCertificateEntries {
		if rc.SerialNumber != nil && rc.SerialNumber.Cmp(subject.SerialNumber) == 0 {
			return fail(CheckRevocation, ErrCertificate, "%s revokes %q (serial %x) since %s", name, subject.Subject.CommonName, subject.SerialNumber, rc.RevocationTime.Format(time.RFC3339))
		}
	}
	return nil
}

func fresh(issued, next, at time.Time) error {
	if at.Before(issued) {
		return fmt.Errorf("issued %s, after the verification time %s", issued.Format(time.RFC3339), at.Format(time.RFC3339))
	}
	if at.After(next) {
		return fmt.Errorf("expired: next update was due %s, verification time is %s", next.Format(time.RFC3339), at.Format(time.RFC3339))
	}
	return nil
}

func maskedEqual(value, mask, want []byte) bool {
	if len(value) != len(mask) || len(mask) != len(want) {
		return false
	}
	for i := range value {
		if value[i]&mask[i] != want[i] {
			return false
		}
	}
	return true
}

func parsePEMCerts(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for len(bytes.TrimSpace(b)) > 0 {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, errors.New("not PEM")
		}
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %q is not a certificate", blk.Type)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
		if len(out) > 8 {
			return nil, errors.New("too many certificates")
		}
	}
	return out, nil
}
