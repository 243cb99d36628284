package tdx

import (
	"bytes"
	"crypto/subtle"
	"slices"
)

// Policy says what a verified quote must attest. The zero value checks only
// that the TD is not debuggable and, when the TCB was evaluated, that its
// status is UpToDate.
type Policy struct {
	// ReportData, when non-nil, must equal the quote's REPORTDATA.
	ReportData *[64]byte
	// MRTDs, when non-empty, lists the allowed MRTD values.
	MRTDs [][]byte
	// RTMRs, when an entry is non-nil, is the required value of that RTMR.
	RTMRs [4][]byte
	// Measurements, when non-empty, lists allowed composite measurements
	// (MeasurementOf).
	Measurements []Measurement
	// AllowDebug accepts debuggable TDs. Zero: a TD with TDATTRIBUTES.DEBUG
	// set is rejected, since its host can read and change its memory.
	AllowDebug bool
	// MinTEETCBSVN, when non-nil (16 bytes), is a component-wise minimum of
	// the TEE TCB SVN.
	MinTEETCBSVN []byte
	// RequireTCB rejects evidence whose TCB was not evaluated (verified
	// without collateral). Zero: such evidence passes the TCB checks.
	RequireTCB bool
	// TCBStatuses lists accepted statuses of the platform TCB level, the TDX
	// module level and the QE level when the TCB was evaluated. Nil means
	// only "UpToDate".
	TCBStatuses []string
}

// Validate checks verified evidence against a policy. It does no
// cryptography: ev must come from Verify. On failure the error is an *Error
// of class ErrPolicy naming the first failed check.
func Validate(ev *Evidence, p Policy) error {
	if ev == nil {
		return fail(CheckReportData, ErrPolicy, "no evidence")
	}
	if p.ReportData != nil && subtle.ConstantTimeCompare(p.ReportData[:], ev.ReportData[:]) != 1 {
		return fail(CheckReportData, ErrPolicy, "REPORTDATA %x is not the expected %x", ev.ReportData, *p.ReportData)
	}
	if len(p.MRTDs) > 0 && !slices.ContainsFunc(p.MRTDs, func(m []byte) bool { return bytes.Equal(m, ev.MRTD) }) {
		return fail(CheckMRTD, ErrPolicy, "MRTD %x is not allowed", ev.MRTD)
	}
	for i, want := range p.RTMRs {
		if want != nil && !bytes.Equal(want, ev.RTMR[i]) {
			return fail(CheckRTMR, ErrPolicy, "RTMR[%d] is %x, want %x", i, ev.RTMR[i], want)
		}
	}
	if len(p.Measurements) > 0 && !slices.ContainsFunc(p.Measurements, func(m Measurement) bool { return bytes.Equal(m, ev.Measurement) }) {
		return fail(CheckMeasurement, ErrPolicy, "measurement %s is not allowed", ev.Measurement)
	}
	if ev.Debug && !p.AllowDebug {
		return fail(CheckDebug, ErrPolicy, "TD is debuggable (TDATTRIBUTES %#016x) and the policy does not allow debug", ev.TDAttributes)
	}
	if p.MinTEETCBSVN != nil {
		if len(p.MinTEETCBSVN) != len(ev.TEETCBSVN) {
			return fail(CheckMinTCB, ErrPolicy, "policy minimum TEE TCB SVN has %d bytes, want 16", len(p.MinTEETCBSVN))
		}
		for i, m := range p.MinTEETCBSVN {
			if ev.TEETCBSVN[i] < m {
				return fail(CheckMinTCB, ErrPolicy, "TEE TCB SVN[%d] is %d, below the minimum %d", i, ev.TEETCBSVN[i], m)
			}
		}
	}
	if !ev.TCB.Evaluated {
		if p.RequireTCB {
			return fail(CheckMinTCB, ErrPolicy, "TCB status was not evaluated (no collateral) and the policy requires it")
		}
		return nil
	}
	accepted := p.TCBStatuses
	if accepted == nil {
		accepted = []string{"UpToDate"}
	}
	for _, st := range []struct{ what, status string }{
		{"platform", ev.TCB.Status}, {"TDX module", ev.TCB.ModuleStatus}, {"QE", ev.TCB.QEStatus},
	} {
		if st.status != "" && !slices.Contains(accepted, st.status) {
			return fail(CheckMinTCB, ErrPolicy, "%s TCB status %q is not accepted (accepted: %v)", st.what, st.status, accepted)
		}
	}
	return nil
}
