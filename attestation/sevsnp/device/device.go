// Package device is the SEV-SNP guest side of ACDS: the attestation.Backend
// of a real SEV-SNP confidential VM. It is the only code of the sevsnp
// family that touches the machine; package sevsnp parses and verifies what
// it produces.
//
// [Open] returns a [Backend] that obtains extended attestation reports
// through go-sev-guest's client — configfs-tsm
// (/sys/kernel/config/tsm/report) when the kernel offers it, the
// /dev/sev-guest ioctl otherwise — and returns them as sevsnp.Evidence: the
// report and the VCEK certificate the host provides with it (never fetched
// from AMD's key distribution service). Its sealing key is the firmware's
// derived key (MSG_KEY_REQ) from the chip's VCEK mixed with the launch
// measurement and the guest policy: the same image under the same policy
// on the same chip derives it again after a restart, while a guest running
// other code, or the same code under another policy, derives another key
// and cannot unseal. A VM moved to another chip cannot open what it sealed
// before (its sealed credentials end failed; see service).
//
// The device packages of the three hardware kinds have one shape:
// device.Open(ctx, device.Options) (*device.Backend, error), where the zero
// Options use the machine's own device and the fields inject another one
// (a test device, a host-specific quote provider). Here Options.Device
// takes any go-sev-guest client.Device, such as the test device of
// go-sev-guest's testing package, and Options.QuoteProvider any
// client.QuoteProvider.
package device

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sevsnp"
	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/client"
	spb "github.com/google/go-sev-guest/proto/sevsnp"
)

// ErrNoVCEK: the host did not provide the VCEK certificate with the
// extended report, and this package never fetches it from the network.
var ErrNoVCEK = errors.New("sev-snp: host provided no VCEK certificate with the report")

// Paths of the SEV-SNP guest interfaces go-sev-guest's client uses, named
// in errors.
const (
	ConfigfsTSM = "/sys/kernel/config/tsm/report"
	GuestDevice = "/dev/sev-guest"
)

// Options say which SEV-SNP guest interface to use. The zero value is the
// machine's own: configfs-tsm, else /dev/sev-guest.
type Options struct {
	// Device is an open sev-guest device (a client.Device). When set,
	// reports come from its ioctls (unless QuoteProvider is also set) and
	// sealing keys are derived through it. Zero value: /dev/sev-guest,
	// opened for each key derivation.
	Device client.Device
	// QuoteProvider returns extended reports (the raw report followed by
	// the certificate table holding the VCEK). Zero value: Device's
	// ioctls when Device is set, else go-sev-guest's choice for this
	// machine (configfs-tsm, then /dev/sev-guest).
	QuoteProvider client.QuoteProvider
}

// Backend is the attestation.Backend of a real SEV-SNP guest. It is safe
// for concurrent use: device commands are serialised.
type Backend struct {
	qp          client.QuoteProvider
	dev         client.Device // nil: open /dev/sev-guest per derivation
	measurement []byte
	mu          sync.Mutex
}

var _ attestation.Backend = (*Backend)(nil)

// Open opens the SEV-SNP guest interface o names and reads the launch
// measurement from a first report. On a machine without one it returns an
// error wrapping attestation.ErrNoTEE that names the paths it looked for.
func Open(ctx context.Context, o Options) (*Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b := &Backend{qp: o.QuoteProvider, dev: o.Device}
	switch {
	case b.qp != nil:
	case b.dev != nil:
		b.qp = deviceProvider{b.dev}
	default:
		qp, err := client.GetQuoteProvider()
		if err != nil {
			return nil, fmt.Errorf("%w: sev-snp: neither %s nor %s answers: %v", attestation.ErrNoTEE, ConfigfsTSM, GuestDevice, err)
		}
		b.qp = qp
	}
	// The measurement is fixed at launch; read it from a report over zeros.
	raw, err := b.qp.GetRawQuote([64]byte{})
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
	b.measurement = rep.GetMeasurement()
	return b, nil
}

// deviceProvider is the client.QuoteProvider of an open sev-guest device:
// extended reports through the GET_EXT_REPORT ioctl.
type deviceProvider struct{ d client.Device }

func (p deviceProvider) IsSupported() bool { return true }

func (p deviceProvider) GetRawQuote(reportData [64]byte) ([]uint8, error) {
	report, certs, err := client.GetRawExtendedReport(p.d, reportData)
	if err != nil {
		return nil, err
	}
	return append(report, certs...), nil
}

// Product returns the device's product (deprecated in go-sev-guest, kept
// for the interface).
func (p deviceProvider) Product() *spb.SevProduct { return p.d.Product() }

// Profile returns attestation.ProfileSEVSNP.
func (b *Backend) Profile() string { return attestation.ProfileSEVSNP }

// Measurement returns the launch measurement (48 bytes).
func (b *Backend) Measurement() []byte { return b.measurement }

// Quote returns sevsnp.Evidence (report + VCEK) whose report data is
// reportData. A host that provides no VCEK is ErrNoVCEK.
func (b *Backend) Quote(ctx context.Context, reportData [64]byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	raw, err := b.qp.GetRawQuote(reportData)
	b.mu.Unlock()
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
	ev := &sevsnp.Evidence{Report: raw[:abi.ReportSize], VCEK: vcek}
	return ev.Marshal()
}

// SealingKey derives a 32-byte key from the chip's VCEK, the measurement
// and the guest policy (DerivedKeyRequest), so only the same code under
// the same policy on the same chip can unseal. It needs the
// sev-guest device (Options.Device, else /dev/sev-guest; configfs-tsm
// offers no key derivation).
func (b *Backend) SealingKey(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	dev := b.dev
	if dev == nil {
		d, err := client.OpenDevice()
		if err != nil {
			return nil, fmt.Errorf("%w: sev-snp key derivation needs %s: %v", attestation.ErrNoTEE, GuestDevice, err)
		}
		defer d.Close()
		dev = d
	}
	resp, err := client.GetDerivedKeyAcknowledgingItsLimitations(dev, DerivedKeyRequest())
	if err != nil {
		return nil, fmt.Errorf("sev-snp key derivation: %w", err)
	}
	key := make([]byte, 32)
	copy(key, resp.Data[:])
	return key, nil
}

// DerivedKeyRequest is the MSG_KEY_REQ SealingKey sends: a key derived
// from the VCEK (not the VM root key, which only a migration agent would
// keep stable across launches) mixed with the measurement and the guest
// policy.
func DerivedKeyRequest() *client.SnpDerivedKeyReq {
	return &client.SnpDerivedKeyReq{
		UseVCEK:          true,
		GuestFieldSelect: client.GuestFieldSelect{Measurement: true, GuestPolicy: true},
	}
}
