//go:build tpmsim

// Tests against the TPM 2.0 reference simulator bundled with go-tpm-tools
// (cgo, needs libssl-dev). Run with: go test -tags tpmsim ./attestation/tpm/
// Add -update to regenerate the committed simulator attestation in testdata.

package tpm

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-eventlog/register"
	"github.com/google/go-eventlog/tcg"
	"github.com/google/go-tpm-tools/client"
	attestpb "github.com/google/go-tpm-tools/proto/attest"
	"github.com/google/go-tpm-tools/simulator"
	"github.com/google/go-tpm/legacy/tpm2"
	"github.com/google/go-tpm/tpmutil"
	"google.golang.org/protobuf/proto"
)

var update = flag.Bool("update", false, "rewrite testdata/sim-* from a fresh simulator attestation")

// simTPM is the simulator with the event log whose events were extended into
// its PCRs; client.GetEventLog reads the log through EventLog.
type simTPM struct {
	io.ReadWriteCloser
	log []byte
}

func (s simTPM) EventLog() ([]byte, error) { return s.log, nil }

// newSim starts a simulator and replays a real RHEL 8 UEFI boot's event log
// into its SHA-1 and SHA-256 PCR banks, as firmware would have.
func newSim(t *testing.T) simTPM {
	t.Helper()
	sim, err := simulator.Get()
	if err != nil {
		t.Fatalf("simulator: %v", err)
	}
	t.Cleanup(func() { sim.Close() })
	log := readTestdata(t, "rhel8-uefi.bin")
	el, err := tcg.ParseEventLog(log, tcg.ParseOpts{})
	if err != nil {
		t.Fatal(err)
	}
	for _, alg := range []register.HashAlg{register.HashSHA1, register.HashSHA256} {
		for _, e := range el.Events(alg) {
			if e.Type == 0x03 || len(e.Digest) == 0 { // EV_NO_ACTION is not extended
				continue
			}
			if err := tpm2.PCRExtend(sim, tpmutil.Handle(e.Index), tpm2.Algorithm(alg), e.Digest, ""); err != nil {
				t.Fatalf("extend PCR %d: %v", e.Index, err)
			}
		}
	}
	return simTPM{sim, log}
}

// Attest is what package attestation/tpm/device does to quote (which
// cannot be imported here): go-tpm-tools' owner-hierarchy ECC AK quotes
// every PCR bank over the nonce, with the event log of rw.
func Attest(rw io.ReadWriter, nonce []byte) ([]byte, error) {
	ak, err := client.AttestationKeyECC(rw)
	if err != nil {
		return nil, err
	}
	defer ak.Close()
	att, err := ak.Attest(client.AttestOpts{Nonce: nonce, SkipTeeAttestation: true})
	if err != nil {
		return nil, err
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(att)
}

func simAK(t *testing.T, rw io.ReadWriter) crypto.PublicKey {
	t.Helper()
	ak, err := client.AttestationKeyECC(rw)
	if err != nil {
		t.Fatal(err)
	}
	defer ak.Close()
	return ak.PublicKey()
}

func nonce64(t *testing.T) []byte {
	n := make([]byte, 64)
	if _, err := rand.Read(n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSimAttestVerify(t *testing.T) {
	sim := newSim(t)
	nonce := nonce64(t)
	att, err := Attest(sim, nonce)
	if err != nil {
		t.Fatalf("Attest: %v", err)
	}
	akPub := simAK(t, sim)
	ev, err := Verify(att, nonce, Options{TrustedAKs: []crypto.PublicKey{akPub}})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	// The measurement equals the digest of the PCRs read from the TPM directly.
	pcrs, err := client.ReadPCRs(sim, tpm2.PCRSelection{Hash: tpm2.AlgSHA256, PCRs: DefaultPCRs()})
	if err != nil {
		t.Fatal(err)
	}
	want := MeasurementOf(pcrs.GetPcrs(), DefaultPCRs())
	if !bytes.Equal(ev.Measurement, want) || len(want) != 32 {
		t.Fatalf("measurement %s, TPM PCRs give %x", ev.Measurement, want)
	}
	if bytes.Equal(pcrs.GetPcrs()[0], make([]byte, 32)) {
		t.Fatal("PCR 0 is zero: the event log was not replayed")
	}
	if ev.MachineState == nil {
		t.Error("no machine state from the event log")
	}

	// Another measured boot (one more extend of PCR 4) changes the measurement.
	if err := tpm2.PCRExtend(sim, 4, tpm2.AlgSHA256, make([]byte, 32), ""); err != nil {
		t.Fatal(err)
	}
	att2, err := Attest(sim, nonce)
	if err != nil {
		t.Fatal(err)
	}
	// Its event log no longer replays to PCR 4.
	_, err = Verify(att2, nonce, Options{TrustedAKs: []crypto.PublicKey{akPub}})
	wantErr(t, err, ErrEventLog, CheckEventLog)

}

func TestSimNegative(t *testing.T) {
	sim := newSim(t)
	nonce := nonce64(t)
	raw, err := Attest(sim, nonce)
	if err != nil {
		t.Fatal(err)
	}
	akPub := simAK(t, sim)
	pinned := Options{TrustedAKs: []crypto.PublicKey{akPub}}
	for _, tc := range negativeCases(nonce) {
		t.Run(tc.name, func(t *testing.T) {
			att, n, opts := tc.mutate(t, raw, pinned)
			_, err := Verify(att, n, opts)
			wantErr(t, err, tc.class, tc.check)
		})
	}
}

func TestSimAKCertificate(t *testing.T) {
	sim := newSim(t)
	nonce := nonce64(t)
	raw, err := Attest(sim, nonce)
	if err != nil {
		t.Fatal(err)
	}
	akPub := simAK(t, sim)
	ca, caKey := testCA(t, "ACDS test TPM CA")
	withCert := addAKCert(t, raw, akCert(t, ca, caKey, akPub))
	ev, err := Verify(withCert, nonce, Options{Roots: []*x509.Certificate{ca}, Now: at(pinnedTime)})
	if err != nil || ev.AKCertificate == nil {
		t.Fatalf("Verify with AK certificate = %v", err)
	}
	other, _ := testCA(t, "Another CA")
	_, err = Verify(withCert, nonce, Options{Roots: []*x509.Certificate{other}, Now: at(pinnedTime)})
	wantErr(t, err, ErrUntrustedAK, CheckAK)

	if !*update {
		return
	}
	// Regenerate the committed test vectors.
	akDER, err := x509.MarshalPKIXPublicKey(akPub)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"sim-attestation.pb": withCert,
		"sim-nonce.hex":      []byte(hex.EncodeToString(nonce) + "\n"),
		"sim-ak.pem":         pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: akDER}),
		"sim-ca.pem":         pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join("testdata", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote %d files to testdata", len(files))
}

func TestSimUntrustedAK(t *testing.T) {
	sim := newSim(t)
	nonce := nonce64(t)
	raw, err := Attest(sim, nonce)
	if err != nil {
		t.Fatal(err)
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Verify(raw, nonce, Options{TrustedAKs: []crypto.PublicKey{other.Public()}})
	wantErr(t, err, ErrUntrustedAK, CheckAK)

	// The simulator holds no AK certificate, so trusting roots cannot work.
	ca, _ := testCA(t, "ACDS test TPM CA")
	_, err = Verify(raw, nonce, Options{Roots: []*x509.Certificate{ca}, Now: at(pinnedTime)})
	wantErr(t, err, ErrUntrustedAK, CheckAK)
	var a attestpb.Attestation
	if err := proto.Unmarshal(raw, &a); err != nil {
		t.Fatal(err)
	}
	if len(a.GetAkCert()) != 0 {
		t.Errorf("simulator AK unexpectedly has a certificate")
	}
}

func TestSimRSAAttestationKey(t *testing.T) {
	// Attest uses the ECC AK; Verify also accepts RSASSA quotes by an RSA AK.
	sim := newSim(t)
	ak, err := client.AttestationKeyRSA(sim)
	if err != nil {
		t.Fatal(err)
	}
	defer ak.Close()
	nonce := nonce64(t)
	a, err := ak.Attest(client.AttestOpts{Nonce: nonce, SkipTeeAttestation: true})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := proto.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := Verify(raw, nonce, Options{TrustedAKs: []crypto.PublicKey{ak.PublicKey()}})
	if err != nil {
		t.Fatalf("Verify(RSA AK attestation) = %v", err)
	}
	ecc := simAK(t, sim)
	_, err = Verify(raw, nonce, Options{TrustedAKs: []crypto.PublicKey{ecc}})
	wantErr(t, err, ErrUntrustedAK, CheckAK)
	if len(ev.Measurement) != 32 {
		t.Errorf("measurement %s", ev.Measurement)
	}
}
