package tdx_test

import (
	"errors"
	"fmt"
	"github.com/acds-project/acds/attestation"
	"os"
	"time"

	"github.com/acds-project/acds/attestation/tdx"
)

// Verify a real TDX quote offline, pinning the clock to a time when its PCK
// certificates were valid, then check the report data it binds.
func ExampleVerify() {
	quote, err := os.ReadFile("testdata/tdx_prod_quote_SPR_E4.dat")
	if err != nil {
		fmt.Println(err)
		return
	}
	opts := tdx.Options{Now: func() time.Time { return time.Date(2023, 7, 1, 0, 0, 0, 0, time.UTC) }}
	ev, err := tdx.Verify(quote, opts)
	if err != nil {
		fmt.Println("invalid:", err)
		return
	}
	fmt.Println("measurement bytes:", len(ev.Measurement))
	fmt.Println("debug:", ev.Debug)
	fmt.Println("tcb evaluated:", ev.TCB.Evaluated)

	// A bundle verifier checks the binding in one call, in the shape all
	// evidence kinds share (attestation.EvidenceVerifier).
	v := tdx.NewVerifier(tdx.Options{})
	if _, err := v.VerifyEvidence(quote, attestation.EvidenceOptions{Now: opts.Now(), ReportData: &[64]byte{}}); err != nil {
		fmt.Println("binding:", errors.Is(err, attestation.ErrReportData))
	}
	// Output:
	// measurement bytes: 48
	// debug: false
	// tcb evaluated: false
	// binding: true
}
