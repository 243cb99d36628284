package device_test

import (
	"bytes"
	"context"
	"crypto/sha512"
	"crypto/tls"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sevsnp"
	"github.com/acds-project/acds/attestation/sevsnp/device"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/internal/serving/attestedtls"
	"github.com/acds-project/acds/verify"
	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/client"
	labi "github.com/google/go-sev-guest/client/linuxabi"
	spb "github.com/google/go-sev-guest/proto/sevsnp"
	sgtest "github.com/google/go-sev-guest/testing"
	"github.com/google/go-sev-guest/verify/trust"
)

// chipDevice is go-sev-guest's test sev-guest device (the mock its own
// client tests use: it answers the GET_REPORT, GET_EXT_REPORT and
// GET_DERIVED_KEY ioctls the way the kernel driver does, signing reports
// with a test AMD chain) programmed on the fly: for every report request
// it prepares a report over the requested report data carrying this
// guest's launch measurement and policy, which the device then signs.
type chipDevice struct {
	*sgtest.Device
	measurement []byte
}

func (d *chipDevice) Ioctl(command uintptr, req any) (uintptr, error) {
	if r, ok := req.(*labi.SnpUserGuestRequest); ok {
		switch x := r.ReqData.(type) {
		case *labi.SnpExtendedReportReq:
			d.program(x.Data.ReportData)
		case *labi.SnpReportReqABI:
			d.program(x.ReportData)
		}
	}
	return d.Device.Ioctl(command, req)
}

func (d *chipDevice) program(rd [64]byte) {
	r := &spb.Report{
		Version:         2,
		Policy:          abi.SnpPolicyToBytes(abi.SnpPolicy{ABIMajor: 0, ABIMinor: 31, SMT: true}),
		FamilyId:        make([]byte, abi.FamilyIDSize),
		ImageId:         make([]byte, abi.ImageIDSize),
		SignatureAlgo:   abi.SignEcdsaP384Sha384,
		SignerInfo:      abi.ComposeSignerInfo(abi.SignerInfo{SigningKey: abi.VcekReportSigner}),
		ReportData:      rd[:],
		Measurement:     d.measurement,
		HostData:        make([]byte, abi.HostDataSize),
		IdKeyDigest:     make([]byte, abi.IDKeyDigestSize),
		AuthorKeyDigest: make([]byte, abi.AuthorKeyDigestSize),
		ReportId:        make([]byte, abi.ReportIDSize),
		ReportIdMa:      bytes.Repeat([]byte{0xff}, abi.ReportIDMASize),
		ChipId:          d.Signer.HWID[:],
		CurrentTcb:      uint64(d.Signer.TCB),
		ReportedTcb:     uint64(d.Signer.TCB),
		CommittedTcb:    uint64(d.Signer.TCB),
		LaunchTcb:       uint64(d.Signer.TCB),
		Signature:       make([]byte, abi.SignatureSize),
	}
	raw, err := abi.ReportToAbiBytes(r)
	if err != nil {
		panic(err) // a broken test fixture, not input
	}
	resp := &sgtest.GetReportResponse{}
	copy(resp.Resp.Data[:], raw)
	d.ReportDataRsp[string(hexOf(rd[:]))] = resp
}

func hexOf(b []byte) []byte {
	const digits = "0123456789abcdef"
	out := make([]byte, 2*len(b))
	for i, c := range b {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&15]
	}
	return out
}

// sealingKey is what the test device answers to exactly the derived-key
// request of device.DerivedKeyRequest (VCEK, measurement, guest policy);
// any other request is an error of the device.
var sealingKey = bytes.Repeat([]byte{0x5e}, 32)

func newChip(t testing.TB, measurement []byte) *chipDevice {
	t.Helper()
	req := device.DerivedKeyRequest()
	abiReq := &labi.SnpDerivedKeyReqABI{GuestFieldSelect: req.GuestFieldSelect.ABI()}
	if !req.UseVCEK {
		abiReq.RootKeySelect = 1
	}
	d, err := sgtest.TcDevice(nil, &sgtest.DeviceOptions{
		Now:     time.Now(),
		Product: abi.DefaultSevProduct(),
		Keys:    map[string][]byte{sgtest.DerivedKeyRequestToString(abiReq): sealingKey},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &chipDevice{Device: d, measurement: measurement}
}

func chipRoots(d *chipDevice) map[string][]*trust.AMDRootCerts {
	line := sgtest.GetProductLine()
	return map[string][]*trust.AMDRootCerts{line: {{
		Product: line, ProductLine: line,
		ProductCerts: &trust.ProductCerts{Ask: d.Signer.Ask, Ark: d.Signer.Ark, Asvk: d.Signer.Asvk},
	}}}
}

// The ioctl path end to end: reports and the derived key come from
// go-sev-guest's test device through its client, attestation.New starts an
// enclave on them, and package verify accepts its bundles under a policy
// naming this measurement and the device's AMD chain, and refuses them
// under another measurement.
func TestIoctlDeviceThroughVerify(t *testing.T) {
	ctx := context.Background()
	m := sha512.Sum384([]byte("launch measurement"))
	chip := newChip(t, m[:])
	b, err := device.Open(ctx, device.Options{Device: chip})
	if err != nil {
		t.Fatal(err)
	}
	if b.Profile() != attestation.ProfileSEVSNP || !bytes.Equal(b.Measurement(), m[:]) {
		t.Fatalf("profile %s, measurement %x", b.Profile(), b.Measurement())
	}
	key, err := b.SealingKey(ctx)
	if err != nil || !bytes.Equal(key, sealingKey) {
		t.Fatalf("derived key through the ioctl: %x %v", key, err)
	}
	e, err := attestation.New(ctx, b, attestation.Options{TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := e.Seal([]byte("portal password"), []byte("req-1"))
	if err != nil {
		t.Fatal(err)
	}
	// A second enclave on the same chip and image (a restart) opens it.
	e2, err := attestation.New(ctx, b, attestation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := e2.Open(sealed, []byte("req-1")); err != nil || string(pt) != "portal password" {
		t.Fatalf("restart: %q %v", pt, err)
	}
	claims := attestation.Claims{RequestID: "req-1", OutputFormat: acds.OutputFHIRR4, OutputDigest: attestation.Digest([]byte("out")),
		Source: attestation.Source{Kind: acds.SourceRaw, InputDigest: attestation.Digest([]byte("in"))}}
	bundle, err := e.Attest(ctx, claims, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := sevsnp.ParseEvidence(e.BootEvidence().Evidence)
	if err != nil || len(ev.VCEK) == 0 || len(ev.ASK) != 0 || len(ev.ARK) != 0 {
		t.Fatalf("hardware evidence carries the VCEK only: %v", err)
	}
	for _, tc := range []struct {
		name        string
		measurement []byte
		valid       bool
	}{
		{"this measurement", m[:], true},
		{"another measurement", bytes.Repeat([]byte{1}, 48), false},
	} {
		v, err := verify.New(verify.Policy{AMDRoots: chipRoots(chip), Measurements: map[string][][]byte{attestation.ProfileSEVSNP: {tc.measurement}}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := v.Verify(bundle)
		if err != nil {
			t.Fatal(err)
		}
		if res.Valid != tc.valid {
			t.Errorf("%s: valid %v, want %v (%+v)", tc.name, res.Valid, tc.valid, res)
		}
	}
	// AMD's real roots refuse the test chain.
	v, err := verify.New(verify.Policy{Measurements: map[string][][]byte{attestation.ProfileSEVSNP: {m[:]}}})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := v.Verify(bundle); err != nil || res.Valid {
		t.Fatalf("AMD roots accepted a test chain: %v %v", res, err)
	}
}

// A device that answers another derived-key request than the one
// SealingKey must send (here: none) is an error, never a zero key.
func TestDerivedKeyRequestIsChecked(t *testing.T) {
	ctx := context.Background()
	m := sha512.Sum384([]byte("img"))
	chip := newChip(t, m[:])
	chip.Keys = map[string][]byte{"other request": sealingKey}
	b, err := device.Open(ctx, device.Options{Device: chip})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.SealingKey(ctx); err == nil {
		t.Fatal("a device without this key request derived a key")
	}
	if _, err := attestation.New(ctx, b, attestation.Options{}); err == nil {
		t.Fatal("an enclave started without its sealing key")
	}
}

// chipProvider is a client.QuoteProvider standing in for configfs-tsm: it
// returns extended reports (report ‖ certificate table) signed by a chain
// the test controls.
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

var _ client.QuoteProvider = (*chipProvider)(nil)

// The quote-provider path (configfs-tsm's shape) turns extended reports
// into evidence that verifies against explicitly configured AMD roots.
func TestQuoteProvider(t *testing.T) {
	ctx := context.Background()
	chain, err := sim.NewChain(time.Now(), 2048)
	if err != nil {
		t.Fatal(err)
	}
	m := sha512.Sum384([]byte("launch measurement"))
	h, err := device.Open(ctx, device.Options{QuoteProvider: &chipProvider{chain: chain, measurement: m[:]}})
	if err != nil {
		t.Fatal(err)
	}
	var rd [64]byte
	copy(rd[:], "bind me")
	raw, err := h.Quote(ctx, rd)
	if err != nil {
		t.Fatal(err)
	}
	root := trust.AMDRootCertsProduct(sim.ProductLine)
	root.ProductCerts = &trust.ProductCerts{Ask: chain.ASK, Ark: chain.ARK}
	v := sevsnp.NewVerifier(sevsnp.Roots{AMD: map[string][]*trust.AMDRootCerts{sim.ProductLine: {root}}})
	if _, err := v.Verify(raw, sevsnp.Check{ReportData: &rd, Measurements: [][]byte{m[:]}}); err != nil {
		t.Fatalf("evidence from the provider: %v", err)
	}
	// Without Options.Device, key derivation needs /dev/sev-guest.
	if _, err := os.Stat(device.GuestDevice); err != nil {
		if _, err := h.SealingKey(ctx); !errors.Is(err, attestation.ErrNoTEE) {
			t.Fatalf("sealing key without /dev/sev-guest: %v", err)
		}
	}
	// A host that provides no VCEK: typed error, never a network fetch.
	h2, err := device.Open(ctx, device.Options{QuoteProvider: &chipProvider{chain: chain, measurement: m[:], noVCEK: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h2.Quote(ctx, rd); !errors.Is(err, device.ErrNoVCEK) {
		t.Fatalf("no VCEK: %v", err)
	}
}

func TestAbsentHardwareIsTyped(t *testing.T) {
	for _, p := range []string{device.GuestDevice, device.ConfigfsTSM} {
		if _, err := os.Stat(p); err == nil {
			t.Skipf("%s present", p)
		}
	}
	_, err := device.Open(context.Background(), device.Options{})
	if !errors.Is(err, attestation.ErrNoTEE) || !bytes.Contains([]byte(err.Error()), []byte(device.GuestDevice)) {
		t.Fatalf("Open on a machine without SEV-SNP: %v", err)
	}
}

// Start-up (device.Open and attestation.New: measurement report, boot
// report, derived key) through go-sev-guest's test device, against the
// simulated enclave of package sim as the baseline of the same run.
func BenchmarkStartup(b *testing.B) {
	ctx := context.Background()
	m := sha512.Sum384([]byte("bench"))
	b.Run("sev-snp-sim", func(b *testing.B) {
		dir := b.TempDir()
		for b.Loop() {
			be, err := sim.NewBackend(dir, sim.Options{Measurement: m[:], RSABits: 2048})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := attestation.New(ctx, be, attestation.Options{TLS: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sev-snp-test-device", func(b *testing.B) {
		chip := newChip(b, m[:])
		for b.Loop() {
			be, err := device.Open(ctx, device.Options{Device: chip})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := attestation.New(ctx, be, attestation.Options{TLS: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Enclave.Seal and Enclave.Open of a 64-byte credential (AES-256-GCM under
// the sealing key; the hardware is asked for the key once, at start).
func BenchmarkSealOpen(b *testing.B) {
	ctx := context.Background()
	m := sha512.Sum384([]byte("bench"))
	be, err := device.Open(ctx, device.Options{Device: newChip(b, m[:])})
	if err != nil {
		b.Fatal(err)
	}
	e, err := attestation.New(ctx, be, attestation.Options{})
	if err != nil {
		b.Fatal(err)
	}
	secret := bytes.Repeat([]byte{'p'}, 64)
	for b.Loop() {
		s, err := e.Seal(secret, []byte("req"))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.Open(s, []byte("req")); err != nil {
			b.Fatal(err)
		}
	}
}

// Attested TLS on the SEV-SNP backend: the certificate carries the boot
// evidence from the test device, and a client checking it with a policy
// naming this measurement and the device's chain completes the handshake;
// one expecting another measurement refuses it.
func TestAttestedTLS(t *testing.T) {
	ctx := context.Background()
	m := sha512.Sum384([]byte("launch measurement"))
	chip := newChip(t, m[:])
	b, err := device.Open(ctx, device.Options{Device: chip})
	if err != nil {
		t.Fatal(err)
	}
	e, err := attestation.New(ctx, b, attestation.Options{TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	certs, err := attestedtls.NewCertificates(e, attestedtls.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", certs.TLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	for _, tc := range []struct {
		name        string
		measurement []byte
		ok          bool
	}{{"this measurement", m[:], true}, {"another measurement", bytes.Repeat([]byte{1}, 48), false}} {
		v, err := verify.New(verify.Policy{AMDRoots: chipRoots(chip), Measurements: map[string][][]byte{attestation.ProfileSEVSNP: {tc.measurement}}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, VerifyConnection: v.VerifyConnection})
		if err == nil {
			c.Close()
		}
		if (err == nil) != tc.ok {
			t.Errorf("%s: handshake error %v", tc.name, err)
		}
	}
}
