package sevsnp_test

import (
	"bytes"
	"crypto/sha512"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sevsnp"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/google/go-sev-guest/abi"
	spb "github.com/google/go-sev-guest/proto/sevsnp"
	sevverify "github.com/google/go-sev-guest/verify"
)

// milanEvidence is real hardware evidence (see testdata/milan/NOTICE).
func milanEvidence(t testing.TB) *sevsnp.Evidence {
	t.Helper()
	report, err := os.ReadFile("testdata/milan/report.bin")
	if err != nil {
		t.Fatal(err)
	}
	vcek, err := os.ReadFile("testdata/milan/vcek.der")
	if err != nil {
		t.Fatal(err)
	}
	return &sevsnp.Evidence{Report: report, VCEK: vcek}
}

// A time inside the real VCEK's validity (2022-09-24 to 2029-09-24).
var milanNow = time.Date(2023, 6, 1, 12, 0, 0, 0, time.UTC)

func TestRealMilanEvidenceVerifiesOffline(t *testing.T) {
	ev := milanEvidence(t)
	raw, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	v := sevsnp.NewVerifier(sevsnp.Roots{}) // AMD's embedded roots
	res, err := v.Verify(raw, sevsnp.Check{Now: milanNow, AllowDebug: true})
	if err != nil {
		t.Fatalf("real Milan evidence does not verify: %v", err)
	}
	if res.ProductLine != "Milan" || !res.Policy.Debug || len(res.Measurement) != 48 {
		t.Fatalf("unexpected result: product %s debug %v measurement %x", res.ProductLine, res.Policy.Debug, res.Measurement)
	}
	if !res.ValidAt(milanNow) || res.ValidAt(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("validity window %s..%s", res.NotBefore, res.NotAfter)
	}
	// The guest policy allows debugging: refused unless the check allows it.
	if _, err := v.Verify(raw, sevsnp.Check{Now: milanNow}); !errors.Is(err, sevsnp.ErrPolicy) {
		t.Fatalf("debuggable guest accepted by default: %v", err)
	}
	// Measurement allow-list and report data.
	if _, err := v.Verify(raw, sevsnp.Check{Now: milanNow, AllowDebug: true, Measurements: [][]byte{res.Measurement}}); err != nil {
		t.Fatalf("own measurement refused: %v", err)
	}
	if _, err := v.Verify(raw, sevsnp.Check{Now: milanNow, AllowDebug: true, Measurements: [][]byte{make([]byte, 48)}}); !errors.Is(err, sevsnp.ErrMeasurement) {
		t.Fatalf("foreign measurement: %v", err)
	}
	rd := res.ReportData
	rd[0] ^= 1
	if _, err := v.Verify(raw, sevsnp.Check{Now: milanNow, AllowDebug: true, ReportData: &rd}); !errors.Is(err, sevsnp.ErrReportData) {
		t.Fatalf("report data: %v", err)
	}
	// A minimum TCB above the chip's is refused.
	high := res.ReportedTCB
	high.SnpSpl++
	if _, err := v.Verify(raw, sevsnp.Check{Now: milanNow, AllowDebug: true, MinimumTCB: high}); !errors.Is(err, sevsnp.ErrPolicy) {
		t.Fatalf("minimum TCB: %v", err)
	}
	// Before the VCEK was issued.
	if _, err := v.Verify(raw, sevsnp.Check{Now: time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC), AllowDebug: true}); !errors.Is(err, sevsnp.ErrChain) {
		t.Fatalf("not yet valid: %v", err)
	}
}

func TestRealMilanEvidenceOneByteChanged(t *testing.T) {
	v := sevsnp.NewVerifier(sevsnp.Roots{})
	cases := []struct {
		name   string
		mutate func(*sevsnp.Evidence)
		want   error
	}{
		{"report measurement", func(e *sevsnp.Evidence) { e.Report[0x90] ^= 0x01 }, sevsnp.ErrReportSignature},
		{"report data", func(e *sevsnp.Evidence) { e.Report[0x50] ^= 0x80 }, sevsnp.ErrReportSignature},
		{"report chip id", func(e *sevsnp.Evidence) { e.Report[0x1A0] ^= 0x01 }, sevsnp.ErrReportSignature},
		{"report signature R", func(e *sevsnp.Evidence) { e.Report[0x2A0] ^= 0x01 }, sevsnp.ErrReportSignature},
		{"report signature S", func(e *sevsnp.Evidence) { e.Report[0x2A0+0x48] ^= 0x01 }, sevsnp.ErrReportSignature},
		{"vcek signature", func(e *sevsnp.Evidence) { e.VCEK[len(e.VCEK)-10] ^= 0x01 }, sevsnp.ErrChain},
		{"vcek body byte", func(e *sevsnp.Evidence) { i := bytes.Index(e.VCEK, []byte{0x04}); e.VCEK[i+300] ^= 0x01 }, sevsnp.ErrChain},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := milanEvidence(t)
			tc.mutate(ev)
			_, err := v.VerifyParsed(ev, sevsnp.Check{Now: milanNow, AllowDebug: true})
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			t.Logf("reason: %v", err)
		})
	}
}

// A self-made ARK/ASK/VCEK chain with AMD's names and extensions is not
// AMD's: the embedded roots refuse it however it is presented.
func TestForgedAMDChainRejected(t *testing.T) {
	chain, err := sim.NewChain(time.Now(), 2048)
	if err != nil {
		t.Fatal(err)
	}
	m := sha512.Sum384([]byte("forged"))
	var rd [64]byte
	report, err := chain.SignReport(rd, m[:])
	if err != nil {
		t.Fatal(err)
	}
	v := sevsnp.NewVerifier(sevsnp.Roots{})
	// VCEK alone, chain left to the verifier's roots.
	if _, err := v.VerifyParsed(&sevsnp.Evidence{Report: report, VCEK: chain.VCEK.Raw}, sevsnp.Check{}); !errors.Is(err, sevsnp.ErrChain) {
		t.Fatalf("forged VCEK accepted: %v", err)
	}
	// Carrying the forged ASK and ARK does not help.
	if _, err := v.VerifyParsed(&sevsnp.Evidence{Report: report, VCEK: chain.VCEK.Raw, ASK: chain.ASK.Raw, ARK: chain.ARK.Raw}, sevsnp.Check{}); !errors.Is(err, sevsnp.ErrChain) {
		t.Fatalf("forged chain accepted: %v", err)
	}
	// And go-sev-guest itself (>= v0.15.0) refuses a forged chain carried in
	// the attestation under default options.
	proto, err := abi.ReportToProto(report)
	if err != nil {
		t.Fatal(err)
	}
	att := &spb.Attestation{Report: proto, CertificateChain: &spb.CertificateChain{ArkCert: chain.ARK.Raw, AskCert: chain.ASK.Raw, VcekCert: chain.VCEK.Raw}}
	if err := sevverify.SnpAttestation(att, &sevverify.Options{DisableCertFetching: true, Now: time.Now()}); err == nil {
		t.Fatal("go-sev-guest accepted a forged ARK/ASK/VCEK chain: upgrade go-sev-guest to >= v0.15.0")
	}
}

func TestEvidenceParsing(t *testing.T) {
	ev := milanEvidence(t)
	raw, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := sevsnp.ParseEvidence(raw)
	if err != nil || !bytes.Equal(got.Report, ev.Report) || !bytes.Equal(got.VCEK, ev.VCEK) {
		t.Fatalf("round trip: %v", err)
	}
	for name, b := range map[string][]byte{
		"empty":     nil,
		"truncated": raw[:len(raw)-1],
		"trailing":  append(append([]byte(nil), raw...), 0),
		"random":    []byte("not cbor at all"),
	} {
		if _, err := sevsnp.ParseEvidence(b); !errors.Is(err, attestation.ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	short := &sevsnp.Evidence{Report: ev.Report[:100], VCEK: ev.VCEK}
	if _, err := short.Marshal(); !errors.Is(err, attestation.ErrMalformed) {
		t.Errorf("short report: %v", err)
	}
}

// Verification of repeated evidence checks the chain every time (package
// verify caches verified evidence): a chain outside its validity window and a
// tampered report are refused after a success.
func TestRepeatedEvidenceIsCheckedAgain(t *testing.T) {
	ev := milanEvidence(t)
	raw, _ := ev.Marshal()
	v := sevsnp.NewVerifier(sevsnp.Roots{})
	if _, err := v.Verify(raw, sevsnp.Check{Now: milanNow, AllowDebug: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(raw, sevsnp.Check{Now: time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC), AllowDebug: true}); !errors.Is(err, sevsnp.ErrChain) {
		t.Fatalf("expired chain: %v", err)
	}
	ev.Report[0x90] ^= 1
	if _, err := v.VerifyParsed(ev, sevsnp.Check{Now: milanNow, AllowDebug: true}); !errors.Is(err, sevsnp.ErrReportSignature) {
		t.Fatalf("tampered report: %v", err)
	}
}

// The shape all evidence kinds share (attestation.EvidenceVerifier).
func TestVerifierShape(t *testing.T) {
	ev := milanEvidence(t)
	raw, _ := ev.Marshal()
	var v attestation.EvidenceVerifier = sevsnp.NewVerifier(sevsnp.Roots{})
	got, err := v.VerifyEvidence(raw, attestation.EvidenceOptions{Now: milanNow, AllowDebug: true})
	if err != nil || len(got.Measurement) != 48 || !got.ValidAt(milanNow) || len(got.Relaxations) != 0 {
		t.Fatalf("VerifyEvidence = %+v, %v", got, err)
	}
	rd := got.ReportData
	if _, err := v.VerifyEvidence(raw, attestation.EvidenceOptions{Now: milanNow, AllowDebug: true, ReportData: &rd}); err != nil {
		t.Fatalf("its own report data: %v", err)
	}
	rd[0] ^= 1
	if _, err := v.VerifyEvidence(raw, attestation.EvidenceOptions{Now: milanNow, AllowDebug: true, ReportData: &rd}); !errors.Is(err, attestation.ErrReportData) || !errors.Is(err, sevsnp.ErrReportData) {
		t.Fatalf("other report data: %v", err)
	}
}
