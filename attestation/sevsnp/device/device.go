package sevsnp

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/acds-project/acds/attestation"
	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/client"
)

// ErrNoVCEK: the host did not provide the VCEK certificate with the
// extended report, and this package never fetches it from the network.
var ErrNoVCEK = errors.New("sev-snp: host provided no VCEK certificate with the report")

// Hardware is the attestation.Backend of a real SEV-SNP guest. It obtains
// extended reports through configfs-tsm or /dev/sev-guest (whichever the
// kernel offers) and derives its sealing key from the chip's VM root key
// mixed with the measurement and guest policy.
type Hardware struct {
	qp          client.QuoteProvider
	measurement []byte
	mu          sync.Mutex // serialises device commands
}

// NewHardware opens the SEV-SNP guest interface. On a machine without one it
// returns an error wrapping attestation.ErrNoTEE.
func NewHardware() (*Hardware, error) {
	qp, err := client.GetQuoteProvider()
	if err != nil {
		return nil, fmt.Errorf("%w: sev-snp: %v", attestation.ErrNoTEE, err)
	}
	return NewHardwareWithProvider(qp)
}

// NewHardwareWithProvider is NewHardware on a given quote provider (for
// example a host-specific one). The provider must return extended reports:
// the raw report followed by the certificate table holding the VCEK.
func NewHardwareWithProvider(qp client.QuoteProvider) (*Hardware, error) {
	h := &Hardware{qp: qp}
	// The measurement is fixed at launch; read it from a report over zeros.
	raw, err := qp.GetRawQuote([64]byte{})
	if err != nil {
		return nil, fmt.Errorf("%w: sev-snp report: %v", attestation.ErrNoTEE, err)
	}
	if len(raw) < abi.ReportSize {
		return nil, fmt.Errorf("sev-snp report of %d bytes: %w", len(raw), attestation.ErrMalformed)
	}
	rep, err := abi.ReportToProto(raw[:abi.ReportSize])
	if err != nil {
		return nil, fmt.Errorf("sev-snp report: %w: %v", attestation.ErrMalformed, err)
	}
	h.measurement = rep.GetMeasurement()
	return h, nil
}

// Open starts an attestation.Enclave on SEV-SNP hardware.
func Open(ctx context.Context, opts attestation.Options) (*attestation.Enclave, error) {
	h, err := NewHardware()
	if err != nil {
		return nil, err
	}
	return attestation.New(ctx, h, opts)
}

// Profile returns attestation.ProfileSEVSNP.
func (h *Hardware) Profile() string { return attestation.ProfileSEVSNP }

// Measurement returns the launch measurement (48 bytes).
func (h *Hardware) Measurement() []byte { return h.measurement }

// Quote returns Evidence (report + VCEK) whose report data is reportData.
func (h *Hardware) Quote(ctx context.Context, reportData [64]byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h.mu.Lock()
	raw, err := h.qp.GetRawQuote(reportData)
	h.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("sev-snp quote: %w", err)
	}
	if len(raw) < abi.ReportSize {
		return nil, fmt.Errorf("sev-snp quote of %d bytes: %w", len(raw), attestation.ErrMalformed)
	}
	if _, err := abi.ReportToProto(raw[:abi.ReportSize]); err != nil {
		return nil, fmt.Errorf("sev-snp quote: %w: %v", attestation.ErrMalformed, err)
	}
	table := new(abi.CertTable)
	if err := table.Unmarshal(raw[abi.ReportSize:]); err != nil {
		return nil, fmt.Errorf("sev-snp certificate table: %w: %v", attestation.ErrMalformed, err)
	}
	vcek, err := table.GetByGUIDString(abi.VcekGUID)
	if err != nil || len(vcek) == 0 {
		return nil, ErrNoVCEK
	}
	ev := &Evidence{Report: raw[:abi.ReportSize], VCEK: vcek}
	return ev.Marshal()
}

// SealingKey derives a 32-byte key from the VM root key (VMRK), the
// measurement and the guest policy, so only the same code under the same
// policy on this launch's key hierarchy can unseal. It needs /dev/sev-guest.
func (h *Hardware) SealingKey(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	dev, err := client.OpenDevice()
	if err != nil {
		return nil, fmt.Errorf("%w: sev-snp key derivation needs /dev/sev-guest: %v", attestation.ErrNoTEE, err)
	}
	defer dev.Close()
	resp, err := client.GetDerivedKeyAcknowledgingItsLimitations(dev, &client.SnpDerivedKeyReq{
		GuestFieldSelect: client.GuestFieldSelect{Measurement: true, GuestPolicy: true},
	})
	if err != nil {
		return nil, fmt.Errorf("sev-snp key derivation: %w", err)
	}
	key := make([]byte, 32)
	copy(key, resp.Data[:])
	return key, nil
}
