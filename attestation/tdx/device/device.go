// Package device is the TDX guest side of ACDS: the attestation.Backend of
// a real Intel TDX trust domain. It is the only code of the tdx family that
// touches the machine; package tdx verifies what it produces.
//
// [Open] returns a [Backend] that obtains version 4 quotes through
// go-tdx-guest's client: configfs-tsm (/sys/kernel/config/tsm/report) when
// the kernel offers it, the /dev/tdx_guest ioctl otherwise. Its measurement
// is tdx.MeasurementOf the quote's MRTD and RTMRs.
//
// TDX offers a guest no sealing key: SealingKey returns an error wrapping
// attestation.ErrNoSealingKey, and attestation.New then seals with a key
// made for this boot and kept in enclave memory only. Sealed portal
// credentials therefore live as long as the boot: requests still queued
// after a restart end failed, saying why (see service).
//
// The device packages of the three hardware kinds have one shape:
// device.Open(ctx, device.Options) (*device.Backend, error), where the zero
// Options use the machine's own device and the fields inject another one.
// Here Options.QuoteProvider takes a go-tdx-guest client.QuoteProvider or
// client.Device, such as the fakes of go-tdx-guest's testing package.
package device

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/tdx"
	"github.com/google/go-tdx-guest/abi"
	"github.com/google/go-tdx-guest/client"
	pb "github.com/google/go-tdx-guest/proto/tdx"
)

// Paths of the TDX guest interfaces go-tdx-guest's client uses, named in
// errors.
const (
	ConfigfsTSM = "/sys/kernel/config/tsm/report"
	GuestDevice = "/dev/tdx_guest"
)

// ErrNoSealingKey is what SealingKey returns: TDX has no guest sealing
// key. It wraps attestation.ErrNoSealingKey.
var ErrNoSealingKey = fmt.Errorf("tdx: %w: credentials are kept in enclave memory for this boot only", attestation.ErrNoSealingKey)

// Options say which TDX guest interface to use. The zero value is the
// machine's own: configfs-tsm, else /dev/tdx_guest.
type Options struct {
	// QuoteProvider is a go-tdx-guest client.QuoteProvider or an open
	// client.Device (anything client.GetRawQuote accepts). Zero value:
	// configfs-tsm when the kernel offers it, else /dev/tdx_guest, kept
	// open until Close.
	QuoteProvider any
}

// Backend is the attestation.Backend of a TDX trust domain. It is safe for
// concurrent use: device commands are serialised.
type Backend struct {
	qp          any
	closer      func() error
	measurement []byte
	mu          sync.Mutex
}

var _ attestation.Backend = (*Backend)(nil)

// probeReportData is the report data of the quote Open reads the
// measurement from. Any value would do (the measurement does not depend on
// it); this one is also what go-tdx-guest's test fakes answer, so the fakes
// exercise Open.
var probeReportData = [64]byte{63: 1}

// Open opens the TDX guest interface o names and reads the measurement
// from a first quote. On a machine without one it returns an error
// wrapping attestation.ErrNoTEE that names the paths it looked for.
func Open(ctx context.Context, o Options) (*Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b := &Backend{qp: o.QuoteProvider, closer: func() error { return nil }}
	if b.qp == nil {
		qp, err := client.GetQuoteProvider()
		if err == nil {
			err = qp.IsSupported()
		}
		if err == nil {
			b.qp = qp
		} else {
			dev, derr := client.OpenDevice()
			if derr != nil {
				return nil, fmt.Errorf("%w: tdx: neither %s nor %s answers: %v", attestation.ErrNoTEE, ConfigfsTSM, GuestDevice, errors.Join(err, derr))
			}
			b.qp, b.closer = dev, dev.Close
		}
	}
	_, q, err := b.quote(probeReportData)
	if err != nil {
		_ = b.closer()
		return nil, fmt.Errorf("%w: %w", attestation.ErrNoTEE, err)
	}
	body := q.GetTdQuoteBody()
	var rtmrs [4][]byte
	copy(rtmrs[:], body.GetRtmrs())
	b.measurement = tdx.MeasurementOf(body.GetMrTd(), rtmrs)
	return b, nil
}

// quote obtains a quote over reportData and checks that it parses; it
// returns the raw quote and its parse. Whether it binds reportData is for
// verifiers to check (package tdx).
func (b *Backend) quote(reportData [64]byte) ([]byte, *pb.QuoteV4, error) {
	b.mu.Lock()
	raw, err := client.GetRawQuote(b.qp, reportData)
	b.mu.Unlock()
	if err != nil {
		return nil, nil, fmt.Errorf("tdx quote: %w", err)
	}
	if len(raw) == 0 || len(raw) > tdx.MaxQuoteSize {
		return nil, nil, fmt.Errorf("tdx quote of %d bytes: %w", len(raw), attestation.ErrMalformed)
	}
	q, err := parse(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("tdx quote: %w: %v", attestation.ErrMalformed, err)
	}
	return raw, q, nil
}

// parse runs go-tdx-guest's parser, turning a panic into an error.
func parse(raw []byte) (q *pb.QuoteV4, err error) {
	defer func() {
		if r := recover(); r != nil {
			q, err = nil, fmt.Errorf("quote parser failed: %v", r)
		}
	}()
	v, err := abi.QuoteToProto(raw)
	if err != nil {
		return nil, err
	}
	q, ok := v.(*pb.QuoteV4)
	if !ok {
		return nil, fmt.Errorf("quote of type %T, want a version 4 quote", v)
	}
	return q, nil
}

// Profile returns attestation.ProfileTDX.
func (b *Backend) Profile() string { return attestation.ProfileTDX }

// Measurement returns SHA-384(MRTD ‖ RTMR0–3) (48 bytes).
func (b *Backend) Measurement() []byte { return b.measurement }

// Quote returns the raw quote (what package tdx verifies) whose report
// data is reportData. The context is checked before the device call, which
// cannot be cancelled.
func (b *Backend) Quote(ctx context.Context, reportData [64]byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	raw, _, err := b.quote(reportData)
	return raw, err
}

// SealingKey returns ErrNoSealingKey: TDX offers a guest no sealing key.
func (b *Backend) SealingKey(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, ErrNoSealingKey
}

// Close closes the device Open opened (not an injected one).
func (b *Backend) Close() error { return b.closer() }
