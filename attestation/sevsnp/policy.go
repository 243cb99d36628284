package sevsnp

// The policy checks: what an authenticated report says (report data,
// measurement, guest policy, TCB) against what the caller requires. Nothing
// here checks a signature; see crypto.go.

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/kds"
	spb "github.com/google/go-sev-guest/proto/sevsnp"
	"github.com/google/go-sev-guest/validate"
)

// Error classes of the policy checks.
var (
	// ErrReportData: the report data is not the expected value. It wraps
	// attestation.ErrReportData.
	ErrReportData = fmt.Errorf("sev-snp: %w", attestation.ErrReportData)
	// ErrMeasurement: the measurement is not in the allow-list.
	ErrMeasurement = errors.New("sev-snp: measurement not allowed")
	// ErrPolicy: the report fails the policy (debug, TCB, versions, ...).
	ErrPolicy = errors.New("sev-snp: report violates policy")
)

// Check is what a report must satisfy besides a valid signature chain. The
// zero value checks signatures and internal consistency only.
type Check struct {
	// Now is the time at which certificates must be valid. Zero value:
	// time.Now().
	Now time.Time
	// ReportData, when non-nil, is the exact report data required.
	ReportData *[64]byte
	// Measurements, when non-empty, lists the allowed measurements.
	// Zero value: any measurement is accepted (the caller checks).
	Measurements [][]byte
	// AllowDebug accepts a guest policy that permits debugging (the
	// hypervisor can read guest memory). Zero value: rejected.
	AllowDebug bool
	// MinimumTCB is the lowest acceptable reported TCB, per component.
	// Zero value: any.
	MinimumTCB kds.TCBParts
}

// checkPolicy checks what the report says against c: report data and
// measurement first, for a precise error class; then go-sev-guest's
// validate checks them again with the guest policy (debug), TCB
// consistency and minimum, firmware versions and chip ID. It checks no
// signature: the report must have been authenticated before.
func checkPolicy(report *spb.Report, att *spb.Attestation, c Check) error {
	opts := &validate.Options{GuestPolicy: abi.SnpPolicy{SMT: true, Debug: c.AllowDebug}, MinimumTCB: c.MinimumTCB}
	if c.ReportData != nil {
		if !bytes.Equal(report.GetReportData(), c.ReportData[:]) {
			return fmt.Errorf("%w: report data does not bind the expected keys and nonce", ErrReportData)
		}
		opts.ReportData = c.ReportData[:]
	}
	if len(c.Measurements) > 0 {
		var match []byte
		for _, m := range c.Measurements {
			if bytes.Equal(m, report.GetMeasurement()) {
				match = m
				break
			}
		}
		if match == nil {
			return fmt.Errorf("%w: %x", ErrMeasurement, report.GetMeasurement())
		}
		opts.Measurement = match
	}
	if err := validate.SnpAttestation(att, opts); err != nil {
		return fmt.Errorf("%w: %v", ErrPolicy, err)
	}
	return nil
}
