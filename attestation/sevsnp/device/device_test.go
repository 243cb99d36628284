package sevsnp_test

import (
	"context"
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
	"github.com/google/go-sev-guest/verify/trust"
)

// chipProvider is a client.QuoteProvider standing in for the kernel: it
// returns extended reports (report ‖ certificate table) signed by a chain
// the test controls, the way /dev/sev-guest and configfs-tsm do.
type chipProvider struct {
	chain       *sim.Chain
	measurement []byte
	noVCEK      bool
}

func (p *chipProvider) IsSupported() bool { return true }
func (p *chipProvider) Product() *spb.SevProduct {
	return abi.DefaultSevProduct()
}
func (p *chipProvider) GetRawQuote(rd [64]byte) ([]uint8, error) {
	report, err := p.chain.SignReport(rd, p.measurement)
	if err != nil {
		return nil, err
	}
	chain := &spb.CertificateChain{Extras: map[string][]byte{}}
	if !p.noVCEK {
		chain.VcekCert = p.chain.VCEK.Raw
	}
	return append(report, abi.CertsFromProto(chain).Marshal()...), nil
}

// The hardware backend turns extended reports into evidence that verifies
// against explicitly configured AMD roots (here the test chain's ARK/ASK).
func TestHardwareBackendWithProvider(t *testing.T) {
	chain, err := sim.NewChain(time.Now(), 2048)
	if err != nil {
		t.Fatal(err)
	}
	m := sha512.Sum384([]byte("launch measurement"))
	h, err := sevsnp.NewHardwareWithProvider(&chipProvider{chain: chain, measurement: m[:]})
	if err != nil {
		t.Fatal(err)
	}
	if h.Profile() != attestation.ProfileSEVSNP || string(h.Measurement()) != string(m[:]) {
		t.Fatal("profile or measurement")
	}
	var rd [64]byte
	copy(rd[:], "bind me")
	raw, err := h.Quote(context.Background(), rd)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := sevsnp.ParseEvidence(raw)
	if err != nil || len(ev.ASK) != 0 || len(ev.ARK) != 0 {
		t.Fatalf("hardware evidence must carry the VCEK only: %v", err)
	}
	root := trust.AMDRootCertsProduct(sim.ProductLine)
	root.ProductCerts = &trust.ProductCerts{Ask: chain.ASK, Ark: chain.ARK}
	v := sevsnp.NewVerifier(sevsnp.Roots{AMD: map[string][]*trust.AMDRootCerts{sim.ProductLine: {root}}})
	if _, err := v.Verify(raw, sevsnp.Check{ReportData: &rd, Measurements: [][]byte{m[:]}}); err != nil {
		t.Fatalf("evidence from the provider: %v", err)
	}
	// AMD's real roots refuse it.
	if _, err := sevsnp.NewVerifier(sevsnp.Roots{}).Verify(raw, sevsnp.Check{}); !errors.Is(err, sevsnp.ErrChain) {
		t.Fatalf("AMD roots: %v", err)
	}
	// Key derivation needs /dev/sev-guest.
	if _, err := os.Stat("/dev/sev-guest"); err != nil {
		if _, err := h.SealingKey(context.Background()); !errors.Is(err, attestation.ErrNoTEE) {
			t.Fatalf("sealing key without /dev/sev-guest: %v", err)
		}
	}
	// A host that provides no VCEK: typed error, never a network fetch.
	h2, err := sevsnp.NewHardwareWithProvider(&chipProvider{chain: chain, measurement: m[:], noVCEK: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h2.Quote(context.Background(), rd); !errors.Is(err, sevsnp.ErrNoVCEK) {
		t.Fatalf("no VCEK: %v", err)
	}
}
