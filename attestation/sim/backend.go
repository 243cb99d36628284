package sim

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha512"
	"crypto/x509"
	"fmt"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sevsnp"
	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/kds"
	spb "github.com/google/go-sev-guest/proto/sevsnp"
)

// Simulated firmware version reported in every report.
const (
	fwMajor = 1
	fwMinor = 55
	fwBuild = 21
)

// Backend is the attestation.Backend of the simulated enclave.
type Backend struct {
	chain       *Chain
	sealing     []byte
	measurement []byte
}

// Options configure [NewBackend]. The zero value is the production
// configuration.
type Options struct {
	// Measurement overrides the code hash. Zero value: SHA-384 of the
	// running executable ([MeasureSelf]).
	Measurement []byte
	// Now is the clock used when a chain is first created. Zero value:
	// time.Now.
	Now func() time.Time
	// RSABits sizes the simulated ARK and ASK keys when the chain is first
	// created. Zero value: DefaultRSABits (4096, as AMD's); tests may use
	// 2048 to save time.
	RSABits int
}

// NewBackend loads the simulated chip of the installation in dir, creating
// it on first use.
func NewBackend(dir string, opts Options) (*Backend, error) {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	m := opts.Measurement
	if m == nil {
		var err error
		if m, err = MeasureSelf(); err != nil {
			return nil, err
		}
	}
	if len(m) != abi.MeasurementSize {
		return nil, fmt.Errorf("simulated enclave: measurement is %d bytes, want %d", len(m), abi.MeasurementSize)
	}
	c, sealing, err := loadOrCreate(dir, now(), opts.RSABits)
	if err != nil {
		return nil, err
	}
	return &Backend{chain: c, sealing: sealing, measurement: m}, nil
}

// Open starts an attestation.Enclave on the simulated chip in dir: the
// embedded default of `acds serve`.
func Open(ctx context.Context, dir string, opts attestation.Options) (*attestation.Enclave, error) {
	b, err := NewBackend(dir, Options{Now: opts.Now})
	if err != nil {
		return nil, err
	}
	return attestation.New(ctx, b, opts)
}

// Profile returns attestation.ProfileSEVSNPSim.
func (b *Backend) Profile() string { return attestation.ProfileSEVSNPSim }

// Measurement returns the code hash (48 bytes).
func (b *Backend) Measurement() []byte { return b.measurement }

// Root returns this installation's simulated ARK: what a verifier pins to
// trust exactly this installation.
func (b *Backend) Root() *x509.Certificate { return b.chain.ARK }

// Chain returns the simulated certificate chain.
func (b *Backend) Chain() *Chain { return b.chain }

// SealingKey returns the installation's 32-byte sealing key.
func (b *Backend) SealingKey(ctx context.Context) ([]byte, error) {
	return append([]byte(nil), b.sealing...), ctx.Err()
}

// Quote returns sevsnp.Evidence: a signed report over reportData plus the
// simulated VCEK, ASK and ARK.
func (b *Backend) Quote(ctx context.Context, reportData [64]byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	raw, err := b.chain.SignReport(reportData, b.measurement)
	if err != nil {
		return nil, err
	}
	ev := &sevsnp.Evidence{Report: raw, VCEK: b.chain.VCEK.Raw, ASK: b.chain.ASK.Raw, ARK: b.chain.ARK.Raw}
	return ev.Marshal()
}

// SignReport returns a version 3 SEV-SNP ATTESTATION_REPORT with the given
// report data and measurement, signed (ECDSA P-384, SHA-384, crypto/rand)
// by the chain's VCEK, with the TCB, chip ID and product the VCEK
// certifies.
func (c *Chain) SignReport(reportData [64]byte, measurement []byte) ([]byte, error) {
	tcb, err := kds.ComposeTCBParts(TCB)
	if err != nil {
		return nil, err
	}
	reportID := make([]byte, abi.ReportIDSize)
	if _, err := rand.Read(reportID); err != nil {
		return nil, err
	}
	idMA := make([]byte, abi.ReportIDMASize)
	for i := range idMA {
		idMA[i] = 0xff // no migration agent
	}
	r := &spb.Report{
		Version:         abi.ReportVersion3,
		Policy:          abi.SnpPolicyToBytes(abi.SnpPolicy{ABIMajor: 0, ABIMinor: 31, SMT: true}),
		FamilyId:        make([]byte, abi.FamilyIDSize),
		ImageId:         make([]byte, abi.ImageIDSize),
		SignatureAlgo:   abi.SignEcdsaP384Sha384,
		CurrentTcb:      uint64(tcb),
		SignerInfo:      abi.ComposeSignerInfo(abi.SignerInfo{SigningKey: abi.VcekReportSigner}),
		ReportData:      reportData[:],
		Measurement:     measurement,
		HostData:        make([]byte, abi.HostDataSize),
		IdKeyDigest:     make([]byte, abi.IDKeyDigestSize),
		AuthorKeyDigest: make([]byte, abi.AuthorKeyDigestSize),
		ReportId:        reportID,
		ReportIdMa:      idMA,
		ReportedTcb:     uint64(tcb),
		Cpuid1EaxFms:    abi.FmsToCpuid1Eax(0x19, 0x01, 0x01), // Milan B1
		ChipId:          c.HWID,
		CommittedTcb:    uint64(tcb),
		CurrentBuild:    fwBuild,
		CurrentMinor:    fwMinor,
		CurrentMajor:    fwMajor,
		CommittedBuild:  fwBuild,
		CommittedMinor:  fwMinor,
		CommittedMajor:  fwMajor,
		LaunchTcb:       uint64(tcb),
		Signature:       make([]byte, abi.SignatureSize),
	}
	raw, err := abi.ReportToAbiBytes(r)
	if err != nil {
		return nil, fmt.Errorf("simulated report: %w", err)
	}
	digest := sha512.Sum384(abi.SignedComponent(raw))
	rr, ss, err := ecdsa.Sign(rand.Reader, c.vcekKey, digest[:])
	if err != nil {
		return nil, fmt.Errorf("simulated report signature: %w", err)
	}
	if err := abi.SetSignature(rr, ss, raw); err != nil {
		return nil, err
	}
	return raw, nil
}
