//go:build linux

package sevsnp_test

import (
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation/sevsnp"
	"github.com/google/go-sev-guest/abi"
	spb "github.com/google/go-sev-guest/proto/sevsnp"
	sevverify "github.com/google/go-sev-guest/verify"
)

func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkVerifyRealMilan compares, in one run and in thread CPU time,
// go-sev-guest's verify.SnpAttestation on the real Milan evidence (chain
// and signature: "sevguest-cpu-ns") with Verifier.Verify on the same
// evidence (the same checks, plus parsing, error classification and
// validate: "verify-cpu-ns"). "overhead" is their ratio. Repeated evidence
// is cached one layer up, by package verify (see its BenchmarkVerify).
func BenchmarkVerifyRealMilan(b *testing.B) {
	ev := milanEvidence(b)
	raw, _ := ev.Marshal()
	v := sevsnp.NewVerifier(sevsnp.Roots{})
	check := sevsnp.Check{Now: milanNow, AllowDebug: true}
	if _, err := v.Verify(raw, check); err != nil {
		b.Fatal(err)
	}
	report, _ := abi.ReportToProto(ev.Report)
	att := &spb.Attestation{Report: report, CertificateChain: &spb.CertificateChain{VcekCert: ev.VCEK}}
	opts := &sevverify.Options{DisableCertFetching: true, Now: milanNow}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var base, ours time.Duration
	for b.Loop() {
		c0 := threadCPU()
		if err := sevverify.SnpAttestation(att, opts); err != nil {
			b.Fatal(err)
		}
		c1 := threadCPU()
		if _, err := v.Verify(raw, check); err != nil {
			b.Fatal(err)
		}
		c2 := threadCPU()
		base += c1 - c0
		ours += c2 - c1
	}
	n := float64(b.N)
	b.ReportMetric(float64(base.Nanoseconds())/n, "sevguest-cpu-ns")
	b.ReportMetric(float64(ours.Nanoseconds())/n, "verify-cpu-ns")
	if base > 0 {
		b.ReportMetric(float64(ours)/float64(base), "overhead")
	}
}
