package tdx

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"github.com/acds-project/acds/attestation"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The quotes and collateral in testdata come from go-tdx-guest's
// testing/testdata (Apache-2.0, see testdata/README.md).
var (
	// pinned is a time when the PCK chain of the SPR quote and the sample
	// collateral were all valid (go-tdx-guest's tests use the same instant).
	pinned = time.Date(2023, time.July, 1, 1, 0, 0, 0, time.UTC)
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func at(t time.Time) func() time.Time { return func() time.Time { return t } }

func sprQuote(t testing.TB) []byte { return readTestdata(t, "tdx_prod_quote_SPR_E4.dat") }

func wantErr(t *testing.T, err error, class error, check Check) {
	t.Helper()
	if err == nil {
		t.Fatalf("verification passed, want %v at check %s", class, check)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not a *tdx.Error", err)
	}
	if !errors.Is(err, class) || e.Check != check {
		t.Fatalf("got %v (check %s), want class %v at check %s", err, e.Check, class, check)
	}
}

func TestVerifyRealQuote(t *testing.T) {
	quote := sprQuote(t)
	ev, err := Verify(quote, Options{Now: at(pinned)})
	if err != nil {
		t.Fatalf("Verify(real SPR quote) = %v", err)
	}
	// The registers are read from the TD quote body at their ABI offsets.
	body := quote[headerLen:signedLen]
	if !bytes.Equal(ev.MRTD, body[136:184]) {
		t.Errorf("MRTD = %x, want %x", ev.MRTD, body[136:184])
	}
	for i := range rtmrCount {
		off := 328 + i*mrLen
		if !bytes.Equal(ev.RTMR[i], body[off:off+mrLen]) {
			t.Errorf("RTMR[%d] = %x, want %x", i, ev.RTMR[i], body[off:off+mrLen])
		}
	}
	if !bytes.Equal(ev.ReportData[:], body[520:584]) {
		t.Errorf("report data = %x, want %x", ev.ReportData, body[520:584])
	}
	h := sha512_384(body[136:184], body[328:520])
	if !bytes.Equal(ev.Measurement, h) || len(ev.Measurement.String()) != 96 {
		t.Errorf("measurement = %s, want %x", ev.Measurement, h)
	}
	for _, c := range []Check{CheckParse, CheckPCKChain, CheckQuoteSignature, CheckQEReportSignature, CheckQEReportData} {
		if !slices.Contains(ev.Checked, c) {
			t.Errorf("Checked = %v lacks %s", ev.Checked, c)
		}
	}
	if ev.TCB.Evaluated || len(ev.NotChecked) == 0 {
		t.Errorf("without collateral: TCB = %+v, NotChecked = %v", ev.TCB, ev.NotChecked)
	}
	if ev.FMSPC != "50806f000000" || ev.PCKCertificate == nil {
		t.Errorf("FMSPC = %q", ev.FMSPC)
	}
	if !ev.VerifiedAt.Equal(pinned) {
		t.Errorf("VerifiedAt = %v", ev.VerifiedAt)
	}
}

func sha512_384(parts ...[]byte) []byte {
	var rtmrs [4][]byte
	r := parts[1]
	for i := range 4 {
		rtmrs[i] = r[i*48 : (i+1)*48]
	}
	return MeasurementOf(parts[0], rtmrs)
}

func TestVerifyRealQuoteFromGCE(t *testing.T) {
	// A quote from a Container-Optimized OS TD, padded with zeros to 8000
	// bytes by the kernel's configfs buffer.
	quote := readTestdata(t, "cos-113-tdx-quote.dat")
	ev, err := Verify(quote, Options{Now: at(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatalf("Verify(COS quote) = %v", err)
	}
	if len(ev.MRTD) != 48 {
		t.Errorf("MRTD = %x", ev.MRTD)
	}
	if ev.TrailingBytes == 0 || !slices.ContainsFunc(ev.NotChecked, func(s string) bool { return strings.HasPrefix(s, "trailing bytes") }) {
		t.Errorf("padding not reported: %d, %v", ev.TrailingBytes, ev.NotChecked)
	}
}

func TestVerifyOneByteChanged(t *testing.T) {
	quote := sprQuote(t)
	// Offsets into a version 4 quote: 48-byte header, 584-byte body, 4-byte
	// signed-data size, 64-byte signature, 64-byte attestation key, 6 bytes
	// of certification-data header, 384-byte QE report, 64-byte QE report
	// signature, 2+N bytes of QE auth data, 6 bytes of header, PEM chain.
	authLen := int(quote[1218]) | int(quote[1219])<<8
	pemStart := 1220 + authLen + 6
	leafEnd := bytes.Index(quote[pemStart:], []byte("-----END CERTIFICATE-----")) + pemStart
	cases := []struct {
		name  string
		off   int
		class error
		check Check
	}{
		{"header version", 0, ErrMalformed, CheckTEEType},
		{"header tee type", 4, ErrMalformed, CheckParse},
		{"header QE vendor id", 12, ErrSignature, CheckQuoteSignature},
		{"header user data", 40, ErrSignature, CheckQuoteSignature},
		{"body TEE TCB SVN", 48, ErrSignature, CheckQuoteSignature},
		{"body MRTD", 48 + 140, ErrSignature, CheckQuoteSignature},
		{"body RTMR3", 48 + 500, ErrSignature, CheckQuoteSignature},
		{"body report data", 631, ErrSignature, CheckQuoteSignature},
		{"quote signature", 640, ErrSignature, CheckQuoteSignature},
		{"attestation key", 730, ErrSignature, CheckQuoteSignature},
		{"QE report", 770 + 100, ErrSignature, CheckQEReportSignature},
		{"QE report data", 770 + 320 + 5, ErrSignature, CheckQEReportSignature},
		{"QE report signature", 1160, ErrSignature, CheckQEReportSignature},
		{"QE auth data", 1221, ErrSignature, CheckQEReportData},
		{"PCK certificate body", pemStart + 400, ErrCertificate, CheckPCKChain},
		{"PCK certificate signature", leafEnd - 10, ErrCertificate, CheckPCKChain},
		{"root certificate", bytes.LastIndex(quote, []byte("-----END CERTIFICATE-----")) - 10, ErrCertificate, CheckPCKChain},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bad := bytes.Clone(quote)
			bad[tc.off] ^= 0x01
			_, err := Verify(bad, Options{Now: at(pinned)})
			wantErr(t, err, tc.class, tc.check)
		})
	}
}

func TestVerifyAnyByteChangedFails(t *testing.T) {
	// Every byte that the quote's signatures or certificates cover matters:
	// changing it must make verification fail (padding excepted).
	quote := sprQuote(t)
	ev, err := Verify(quote, Options{Now: at(pinned)})
	if err != nil {
		t.Fatal(err)
	}
	step := 7
	if testing.Short() {
		step = 61
	}
	for off := 0; off < len(quote)-ev.TrailingBytes; off += step {
		bad := bytes.Clone(quote)
		bad[off] ^= 0x20
		if _, err := Verify(bad, Options{Now: at(pinned)}); err == nil {
			t.Errorf("changing byte %d still verifies", off)
		}
	}
}

func TestVerifyClockAndRoots(t *testing.T) {
	quote := sprQuote(t)
	_, err := Verify(quote, Options{Now: at(time.Date(2053, 1, 1, 0, 0, 0, 0, time.UTC))})
	wantErr(t, err, ErrCertificate, CheckPCKChain)

	other, _ := testCA(t, "Some Other Root")
	pool := x509.NewCertPool()
	pool.AddCert(other)
	_, err = Verify(quote, Options{Now: at(pinned), Roots: pool})
	wantErr(t, err, ErrCertificate, CheckPCKChain)
}

func TestVerifyBadInput(t *testing.T) {
	quote := sprQuote(t)
	for name, in := range map[string][]byte{
		"empty":     nil,
		"short":     quote[:100],
		"body only": quote[:signedLen+4],
		"truncated": quote[:len(quote)-200],
		"oversized": append(bytes.Clone(quote), make([]byte, MaxQuoteSize)...),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Verify(in, Options{Now: at(pinned)}); !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrCertificate) {
				t.Fatalf("Verify(%s) = %v, want ErrMalformed", name, err)
			}
		})
	}
}

func TestVerifierShape(t *testing.T) {
	quote := sprQuote(t)
	ev, err := Verify(quote, Options{Now: at(pinned)})
	if err != nil {
		t.Fatal(err)
	}
	v := NewVerifier(Options{})
	rd := ev.ReportData
	got, err := v.VerifyEvidence(quote, attestation.EvidenceOptions{Now: pinned, ReportData: &rd})
	if err != nil || !bytes.Equal(got.Measurement, ev.Measurement) || got.ReportData != rd || !got.ValidAt(pinned) || len(got.Relaxations) != 1 {
		t.Fatalf("VerifyEvidence = %+v, %v", got, err)
	}
	other := ev.ReportData
	other[63] ^= 1
	if _, err = v.VerifyEvidence(quote, attestation.EvidenceOptions{Now: pinned, ReportData: &other}); !errors.Is(err, attestation.ErrReportData) {
		t.Fatalf("other report data: %v", err)
	}
	_, err = v.VerifyEvidence(quote, attestation.EvidenceOptions{Now: pinned.AddDate(30, 0, 0)})
	wantErr(t, err, ErrCertificate, CheckPCKChain)
}

func TestValidate(t *testing.T) {
	ev, err := Verify(sprQuote(t), Options{Now: at(pinned)})
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(ev, Policy{
		ReportData:   &ev.ReportData,
		MRTDs:        [][]byte{make([]byte, 48), ev.MRTD},
		RTMRs:        [4][]byte{ev.RTMR[0], nil, nil, ev.RTMR[3]},
		Measurements: []Measurement{ev.Measurement},
		MinTEETCBSVN: ev.TEETCBSVN[:],
	}); err != nil {
		t.Fatalf("Validate(matching policy) = %v", err)
	}
	wrong := make([]byte, 48)
	higher := bytes.Clone(ev.TEETCBSVN[:])
	higher[2]++
	debug := *ev
	debug.Debug = true
	outOfDate := *ev
	outOfDate.TCB = TCB{Evaluated: true, Status: "OutOfDate", QEStatus: "UpToDate"}
	for _, tc := range []struct {
		name  string
		ev    *Evidence
		p     Policy
		check Check
	}{
		{"mrtd", ev, Policy{MRTDs: [][]byte{wrong}}, CheckMRTD},
		{"rtmr", ev, Policy{RTMRs: [4][]byte{nil, nil, wrong, nil}}, CheckRTMR},
		{"measurement", ev, Policy{Measurements: []Measurement{wrong}}, CheckMeasurement},
		{"debug", &debug, Policy{}, CheckDebug},
		{"min svn", ev, Policy{MinTEETCBSVN: higher}, CheckMinTCB},
		{"tcb required", ev, Policy{RequireTCB: true}, CheckMinTCB},
		{"tcb status", &outOfDate, Policy{}, CheckMinTCB},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, Validate(tc.ev, tc.p), ErrPolicy, tc.check)
		})
	}
	if err := Validate(&debug, Policy{AllowDebug: true}); err != nil {
		t.Errorf("debug allowed: %v", err)
	}
	if err := Validate(&outOfDate, Policy{TCBStatuses: []string{"UpToDate", "OutOfDate"}}); err != nil {
		t.Errorf("OutOfDate accepted: %v", err)
	}
}

func sampleCollateral(t testing.TB) *Collateral {
	return &Collateral{
		TCBInfo:     readTestdata(t, "sample_tcbInfo_response"),
		QEIdentity:  readTestdata(t, "sample_qeIdentity_response"),
		IssuerChain: readTestdata(t, "tcb_signing_chain.pem"),
	}
}

func TestCollateralIntelSample(t *testing.T) {
	// Intel's sample collateral is genuinely signed, fresh at the pinned
	// time, for this FMSPC, and its QE identity matches the quote's QE; but
	// its TCB levels require newer SVNs than this platform has, so the
	// platform's TCB level is not supported.
	_, err := Verify(sprQuote(t), Options{Now: at(pinned), Collateral: sampleCollateral(t)})
	wantErr(t, err, ErrTCB, CheckTCBLevel)
}

func TestCollateralTampered(t *testing.T) {
	quote := sprQuote(t)
	c := sampleCollateral(t)
	c.TCBInfo = bytes.Replace(c.TCBInfo, []byte(`"tcbEvaluationDataNumber":15`), []byte(`"tcbEvaluationDataNumber":16`), 1)
	_, err := Verify(quote, Options{Now: at(pinned), Collateral: c})
	wantErr(t, err, ErrSignature, CheckTCBInfo)

	c = sampleCollateral(t)
	c.QEIdentity = bytes.Replace(c.QEIdentity, []byte(`"isvprodid":2`), []byte(`"isvprodid":3`), 1)
	_, err = Verify(quote, Options{Now: at(pinned), Collateral: c})
	wantErr(t, err, ErrSignature, CheckQEIdentity)

	c = sampleCollateral(t)
	c.IssuerChain = readTestdata(t, "tcb_signing_chain.pem")[:200]
	_, err = Verify(quote, Options{Now: at(pinned), Collateral: c})
	wantErr(t, err, ErrCertificate, CheckTCBInfo)

	// Collateral past its nextUpdate is refused.
	_, err = Verify(quote, Options{Now: at(time.Date(2023, 8, 1, 0, 0, 0, 0, time.UTC)), Collateral: sampleCollateral(t)})
	wantErr(t, err, ErrCollateral, CheckTCBInfo)
}

// testCA makes a self-signed ECDSA P-256 CA certificate.
func testCA(t testing.TB, cn string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert, key
}

// resign rewrites one signed collateral document with edit applied to its
// body and signs it with key, in the PCS wire format.
func resign(t testing.TB, raw []byte, field string, key *ecdsa.PrivateKey, edit func(map[string]any)) []byte {
	t.Helper()
	var env map[string]json.RawMessage
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(env[field], &body); err != nil {
		t.Fatal(err)
	}
	edit(body)
	nb, _ := json.Marshal(body)
	d := sha256.Sum256(nb)
	r, s, err := ecdsa.Sign(rand.Reader, key, d[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	out, _ := json.Marshal(map[string]any{field: json.RawMessage(nb), "signature": hex.EncodeToString(sig)})
	return out
}

func TestCollateralLevelMatching(t *testing.T) {
	// Intel's sample TCB info with its first level lowered to this
	// platform's SVNs, re-signed by a test TCB signing key under a test root
	// that the verifier is told to trust: exercises level selection,
	// statuses and advisories end to end.
	root, rootKey := testCA(t, rootCN)
	signKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: tcbSigningCN},
		NotBefore:    root.NotBefore, NotAfter: root.NotAfter,
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, root, &signKey.PublicKey, rootKey)
	if err != nil {
		t.Fatal(err)
	}
	chain := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Raw})...)
	roots := IntelRoots()
	roots.AddCert(root)

	lower := func(status string) func(map[string]any) {
		return func(b map[string]any) {
			levels := b["tcbLevels"].([]any)
			first := levels[0].(map[string]any)
			tcb := first["tcb"].(map[string]any)
			for _, k := range []string{"sgxtcbcomponents", "tdxtcbcomponents"} {
				for _, c := range tcb[k].([]any) {
					c.(map[string]any)["svn"] = 0
				}
			}
			tcb["pcesvn"] = 0
			first["tcbStatus"] = status
			first["advisoryIDs"] = []string{"INTEL-SA-00000"}
		}
	}
	for _, status := range []string{"UpToDate", "OutOfDate"} {
		c := &Collateral{
			TCBInfo:     resign(t, readTestdata(t, "sample_tcbInfo_response"), "tcbInfo", signKey, lower(status)),
			QEIdentity:  resign(t, readTestdata(t, "sample_qeIdentity_response"), "enclaveIdentity", signKey, func(map[string]any) {}),
			IssuerChain: chain,
		}
		ev, err := Verify(sprQuote(t), Options{Now: at(pinned), Roots: roots, Collateral: c})
		if err != nil {
			t.Fatalf("%s: Verify = %v", status, err)
		}
		if !ev.TCB.Evaluated || ev.TCB.Status != status || ev.TCB.QEStatus != "UpToDate" || !slices.Contains(ev.TCB.AdvisoryIDs, "INTEL-SA-00000") {
			t.Fatalf("%s: TCB = %+v", status, ev.TCB)
		}
		err = Validate(ev, Policy{})
		if status == "UpToDate" && err != nil {
			t.Errorf("UpToDate rejected: %v", err)
		}
		if status == "OutOfDate" {
			wantErr(t, err, ErrPolicy, CheckMinTCB)
		}
	}

	// The same collateral signed by a key the verifier does not trust.
	c := &Collateral{
		TCBInfo:     resign(t, readTestdata(t, "sample_tcbInfo_response"), "tcbInfo", signKey, lower("UpToDate")),
		QEIdentity:  readTestdata(t, "sample_qeIdentity_response"),
		IssuerChain: chain,
	}
	_, err = Verify(sprQuote(t), Options{Now: at(pinned), Collateral: c})
	wantErr(t, err, ErrCertificate, CheckTCBInfo)
	// Intel's chain with a body signed by someone else.
	c.IssuerChain = readTestdata(t, "tcb_signing_chain.pem")
	_, err = Verify(sprQuote(t), Options{Now: at(pinned), Collateral: c})
	wantErr(t, err, ErrSignature, CheckTCBInfo)
}
