package tpm

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
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

	"github.com/google/go-eventlog/register"
	"github.com/google/go-eventlog/tcg"
	attestpb "github.com/google/go-tpm-tools/proto/attest"
	tpmpb "github.com/google/go-tpm-tools/proto/tpm"
	"github.com/google/go-tpm/legacy/tpm2"
	"google.golang.org/protobuf/proto"
)

// testdata/sim-* is an attestation made by Attest on the TPM 2.0 reference
// simulator after replaying testdata/rhel8-uefi.bin (a real RHEL 8 boot's
// event log from go-tpm-tools, Apache-2.0) into its PCRs, with an AK
// certificate from a throw-away test CA. `go test -tags tpmsim -update`
// regenerates it. Tests without the simulator verify it offline.

// pinnedTime is inside the test CA's validity (2026 to 2046).
var pinnedTime = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)

func at(t time.Time) func() time.Time { return func() time.Time { return t } }

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type vectors struct {
	att   []byte
	nonce []byte
	ak    crypto.PublicKey
	ca    *x509.Certificate
}

func simVectors(t testing.TB) vectors {
	t.Helper()
	var v vectors
	v.att = readTestdata(t, "sim-attestation.pb")
	n, err := hex.DecodeString(strings.TrimSpace(string(readTestdata(t, "sim-nonce.hex"))))
	if err != nil {
		t.Fatal(err)
	}
	v.nonce = n
	blk, _ := pem.Decode(readTestdata(t, "sim-ak.pem"))
	if v.ak, err = x509.ParsePKIXPublicKey(blk.Bytes); err != nil {
		t.Fatal(err)
	}
	blk, _ = pem.Decode(readTestdata(t, "sim-ca.pem"))
	if v.ca, err = x509.ParseCertificate(blk.Bytes); err != nil {
		t.Fatal(err)
	}
	return v
}

func wantErr(t *testing.T, err error, class error, check Check) {
	t.Helper()
	if err == nil {
		t.Fatalf("verification passed, want %v at check %s", class, check)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not a *tpm.Error", err)
	}
	if !errors.Is(err, class) || e.Check != check {
		t.Fatalf("got %v (check %s), want class %v at check %s", err, e.Check, class, check)
	}
}

func testCA(t testing.TB, cn string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2046, 1, 1, 0, 0, 0, 0, time.UTC),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c, key
}

func akCert(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, ak crypto.PublicKey) []byte {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "ACDS test attestation key"},
		NotBefore:    ca.NotBefore,
		NotAfter:     ca.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, ak, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func edit(t testing.TB, raw []byte, f func(a *attestpb.Attestation)) []byte {
	t.Helper()
	var a attestpb.Attestation
	if err := proto.Unmarshal(raw, &a); err != nil {
		t.Fatal(err)
	}
	f(&a)
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&a)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func addAKCert(t testing.TB, raw, der []byte) []byte {
	return edit(t, raw, func(a *attestpb.Attestation) { a.AkCert = der })
}

type negCase struct {
	name   string
	mutate func(t testing.TB, raw []byte, opts Options) ([]byte, []byte, Options)
	class  error
	check  Check
}

// negativeCases are shared by the simulator tests and the offline tests.
func negativeCases(nonce []byte) []negCase {
	onQuote := func(f func(q []byte) []byte, field string) func(t testing.TB, raw []byte, opts Options) ([]byte, []byte, Options) {
		return func(t testing.TB, raw []byte, opts Options) ([]byte, []byte, Options) {
			return edit(t, raw, func(a *attestpb.Attestation) {
				for _, q := range a.GetQuotes() {
					if tpm2.Algorithm(q.GetPcrs().GetHash()) != tpm2.AlgSHA256 {
						continue
					}
					if field == "quote" {
						q.Quote = f(bytes.Clone(q.Quote))
					} else {
						q.RawSig = f(bytes.Clone(q.RawSig))
					}
				}
			}), nonce, opts
		}
	}
	flipAt := func(i int) func(b []byte) []byte {
		return func(b []byte) []byte {
			if i < 0 {
				i += len(b)
			}
			b[i] ^= 1
			return b
		}
	}
	onPCRs := func(f func(m map[uint32][]byte)) func(t testing.TB, raw []byte, opts Options) ([]byte, []byte, Options) {
		return func(t testing.TB, raw []byte, opts Options) ([]byte, []byte, Options) {
			return edit(t, raw, func(a *attestpb.Attestation) {
				for _, q := range a.GetQuotes() {
					if tpm2.Algorithm(q.GetPcrs().GetHash()) == tpm2.AlgSHA256 {
						f(q.GetPcrs().GetPcrs())
					}
				}
			}), nonce, opts
		}
	}
	return []negCase{
		{"wrong nonce", func(t testing.TB, raw []byte, opts Options) ([]byte, []byte, Options) {
			n := bytes.Clone(nonce)
			n[0] ^= 1
			return raw, n, opts
		}, ErrNonce, CheckNonce},
		{"short nonce", func(t testing.TB, raw []byte, opts Options) ([]byte, []byte, Options) {
			return raw, nonce[:32], opts
		}, ErrNonce, CheckNonce},
		{"tampered quote PCR digest", onQuote(flipAt(-3), "quote"), ErrSignature, CheckQuoteSignature},
		{"tampered quote nonce", onQuote(flipAt(50), "quote"), ErrSignature, CheckQuoteSignature},
		{"tampered quote signature", onQuote(flipAt(-1), "sig"), ErrSignature, CheckQuoteSignature},
		{"tampered PCR value", onPCRs(func(m map[uint32][]byte) { m[4][0] ^= 1 }), ErrPCR, CheckPCRDigest},
		{"missing PCR value", onPCRs(func(m map[uint32][]byte) { delete(m, 9) }), ErrPCR, CheckPCRDigest},
		{"measured PCR not quoted", func(t testing.TB, raw []byte, opts Options) ([]byte, []byte, Options) {
			opts.PCRs = []int{0, 4, 30}
			return raw, nonce, opts
		}, ErrPCR, CheckPCRSelection},
		{"tampered event log digest", func(t testing.TB, raw []byte, opts Options) ([]byte, []byte, Options) {
			return edit(t, raw, func(a *attestpb.Attestation) {
				el, err := tcg.ParseEventLog(a.EventLog, tcg.ParseOpts{})
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range el.Events(register.HashSHA256) {
					if e.Index == 4 && len(e.Digest) == 32 {
						i := bytes.Index(a.EventLog, e.Digest)
						a.EventLog = bytes.Clone(a.EventLog)
						a.EventLog[i] ^= 1
						return
					}
				}
				t.Fatal("no PCR 4 event")
			}), nonce, opts
		}, ErrEventLog, CheckEventLog},
		{"AK not restricted", func(t testing.TB, raw []byte, opts Options) ([]byte, []byte, Options) {
			return edit(t, raw, func(a *attestpb.Attestation) {
				a.AkPub = bytes.Clone(a.AkPub)
				a.AkPub[5] &^= 0x01 // TPMA_OBJECT bit 16, restricted
			}), nonce, opts
		}, ErrUntrustedAK, CheckAK},
		{"untrusted AK", func(t testing.TB, raw []byte, opts Options) ([]byte, []byte, Options) {
			k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			return raw, nonce, Options{TrustedAKs: []crypto.PublicKey{k.Public()}}
		}, ErrUntrustedAK, CheckAK},
		{"no trust anchor", func(t testing.TB, raw []byte, opts Options) ([]byte, []byte, Options) {
			return raw, nonce, Options{}
		}, ErrNoTrust, CheckTrust},
		{"two trust anchors", func(t testing.TB, raw []byte, opts Options) ([]byte, []byte, Options) {
			ca, _ := testCA(t, "x")
			opts.Roots = []*x509.Certificate{ca}
			return raw, nonce, opts
		}, ErrNoTrust, CheckTrust},
		{"no SHA-256 quote", func(t testing.TB, raw []byte, opts Options) ([]byte, []byte, Options) {
			return edit(t, raw, func(a *attestpb.Attestation) {
				a.Quotes = slices.DeleteFunc(a.Quotes, func(q *tpmpb.Quote) bool { return tpm2.Algorithm(q.GetPcrs().GetHash()) == tpm2.AlgSHA256 })
			}), nonce, opts
		}, ErrMalformed, CheckParse},
		{"truncated", func(t testing.TB, raw []byte, opts Options) ([]byte, []byte, Options) {
			return raw[:len(raw)/2], nonce, opts
		}, ErrMalformed, CheckParse},
		{"oversized", func(t testing.TB, raw []byte, opts Options) ([]byte, []byte, Options) {
			return append(bytes.Clone(raw), make([]byte, MaxAttestationSize)...), nonce, opts
		}, ErrMalformed, CheckSize},
	}
}

func TestVerifySimulatorAttestation(t *testing.T) {
	v := simVectors(t)
	ev, err := Verify(v.att, v.nonce, Options{TrustedAKs: []crypto.PublicKey{v.ak}})
	if err != nil {
		t.Fatalf("Verify(committed simulator attestation) = %v", err)
	}
	if !slices.Equal(ev.MeasuredPCRs, DefaultPCRs()) || len(ev.Measurement) != 32 || len(ev.PCRs) < 10 {
		t.Fatalf("evidence: %v, %d PCRs", ev, len(ev.PCRs))
	}
	if !bytes.Equal(ev.Measurement, MeasurementOf(ev.PCRs, []int{9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0})) {
		t.Error("MeasurementOf is not order- and duplicate-independent")
	}
	for _, c := range []Check{CheckAK, CheckQuoteSignature, CheckNonce, CheckPCRDigest, CheckPCRSelection, CheckEventLog} {
		if !slices.Contains(ev.Checked, c) {
			t.Errorf("Checked %v lacks %s", ev.Checked, c)
		}
	}
	// A different PCR set gives a different measurement.
	ev2, err := Verify(v.att, v.nonce, Options{TrustedAKs: []crypto.PublicKey{v.ak}, PCRs: []int{0, 1, 2, 3, 4, 5, 6, 7}})
	if err != nil || bytes.Equal(ev2.Measurement, ev.Measurement) {
		t.Fatalf("PCRs 0-7: %v, %v", ev2, err)
	}
	if ev.Measurement.String() != hex.EncodeToString(ev.Measurement) {
		t.Fatalf("Measurement.String = %s", ev.Measurement)
	}
	// The shape all evidence kinds share (attestation.EvidenceVerifier).
	var rd [64]byte
	copy(rd[:], v.nonce)
	kind := NewVerifier(Options{TrustedAKs: []crypto.PublicKey{v.ak}})
	got, err := kind.VerifyEvidence(v.att, attestation.EvidenceOptions{ReportData: &rd})
	if err != nil || !bytes.Equal(got.Measurement, ev.Measurement) || got.ReportData != rd || !got.NotAfter.IsZero() {
		t.Fatalf("VerifyEvidence = %+v, %v", got, err)
	}
	rd[0] ^= 1
	if _, err := kind.VerifyEvidence(v.att, attestation.EvidenceOptions{ReportData: &rd}); !errors.Is(err, attestation.ErrReportData) || !errors.Is(err, ErrNonce) {
		t.Fatalf("other report data: %v", err)
	}
	if _, err := kind.VerifyEvidence(v.att, attestation.EvidenceOptions{}); !errors.Is(err, attestation.ErrReportData) {
		t.Fatalf("no report data: %v", err)
	}
}

func TestVerifyAKCertificate(t *testing.T) {
	v := simVectors(t)
	ev, err := Verify(v.att, v.nonce, Options{Roots: []*x509.Certificate{v.ca}, Now: at(pinnedTime)})
	if err != nil || ev.AKCertificate == nil {
		t.Fatalf("Verify via AK certificate = %v", err)
	}
	// Expired certificate.
	_, err = Verify(v.att, v.nonce, Options{Roots: []*x509.Certificate{v.ca}, Now: at(time.Date(2050, 1, 1, 0, 0, 0, 0, time.UTC))})
	wantErr(t, err, ErrUntrustedAK, CheckAK)
	// Another root.
	other, otherKey := testCA(t, "Another CA")
	_, err = Verify(v.att, v.nonce, Options{Roots: []*x509.Certificate{other}, Now: at(pinnedTime)})
	wantErr(t, err, ErrUntrustedAK, CheckAK)
	// A genuine certificate from the trusted-by-policy CA, but for another key.
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	swapped := addAKCert(t, v.att, akCert(t, other, otherKey, k.Public()))
	_, err = Verify(swapped, v.nonce, Options{Roots: []*x509.Certificate{other}, Now: at(pinnedTime)})
	wantErr(t, err, ErrUntrustedAK, CheckAK)
	// No certificate at all.
	_, err = Verify(addAKCert(t, v.att, nil), v.nonce, Options{Roots: []*x509.Certificate{v.ca}, Now: at(pinnedTime)})
	wantErr(t, err, ErrUntrustedAK, CheckAK)
}

func TestVerifyNegative(t *testing.T) {
	v := simVectors(t)
	pinned := Options{TrustedAKs: []crypto.PublicKey{v.ak}}
	for _, tc := range negativeCases(v.nonce) {
		t.Run(tc.name, func(t *testing.T) {
			att, n, opts := tc.mutate(t, v.att, pinned)
			_, err := Verify(att, n, opts)
			wantErr(t, err, tc.class, tc.check)
		})
	}
}

func TestParseAK(t *testing.T) {
	v := simVectors(t)
	ak, cert, err := ParseAK(v.att)
	if err != nil {
		t.Fatal(err)
	}
	if !sameKey(ak, v.ak) {
		t.Fatal("ParseAK returned another key than the attestation's AK")
	}
	if cert != nil {
		c, err := x509.ParseCertificate(cert)
		if err != nil || !sameKey(c.PublicKey, ak) {
			t.Fatalf("AK certificate: %v", err)
		}
	}
	for _, bad := range [][]byte{{0xff}, make([]byte, MaxAttestationSize+1)} {
		if _, _, err := ParseAK(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("%d bytes: %v", len(bad), err)
		}
	}
}
