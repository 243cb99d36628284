package device_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/tdx"
	"github.com/acds-project/acds/attestation/tdx/device"
	tdxtest "github.com/google/go-tdx-guest/testing"
	"github.com/google/go-tdx-guest/testing/testdata"
)

// pinned is a time when the PCK chain of go-tdx-guest's test quote was
// valid (its own tests use the same instant).
var pinned = time.Date(2023, time.July, 1, 1, 0, 0, 0, time.UTC)

// fakeInput is the report data go-tdx-guest's fakes answer.
var fakeInput = tdxtest.TestCases()[0].Input

// Both of go-tdx-guest's fakes — the configfs-tsm style quote provider and
// the /dev/tdx_guest ioctl device (GET_REPORT then GET_QUOTE) — give
// quotes through the backend that package tdx verifies against Intel's
// root, with the report data asked for and the measurement the backend
// reports.
func TestFakes(t *testing.T) {
	ctx := context.Background()
	dev, err := tdxtest.TcDevice(tdxtest.TestCases())
	if err != nil {
		t.Fatal(err)
	}
	qp, err := tdxtest.TcQuoteProvider(tdxtest.TestCases())
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]any{"quote provider": qp, "ioctl device": dev} {
		t.Run(name, func(t *testing.T) {
			b, err := device.Open(ctx, device.Options{QuoteProvider: p})
			if err != nil {
				t.Fatal(err)
			}
			raw, err := b.Quote(ctx, fakeInput)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(raw, testdata.RawQuote) {
				t.Fatal("the backend changed the device's quote")
			}
			ev, err := tdx.Verify(raw, tdx.Options{Now: func() time.Time { return pinned }})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(ev.Measurement, b.Measurement()) || b.Profile() != attestation.ProfileTDX {
				t.Fatalf("measurement %s, backend says %x", ev.Measurement, b.Measurement())
			}
			// Through the EvidenceVerifier shape package verify uses. (The
			// fakes answer a canned quote whose REPORTDATA is not the
			// input, so the binding is checked against the quote's own.)
			v := tdx.NewVerifier(tdx.Options{})
			if _, err := v.VerifyEvidence(raw, attestation.EvidenceOptions{Now: pinned, ReportData: &ev.ReportData}); err != nil {
				t.Fatal(err)
			}
			if _, err := v.VerifyEvidence(raw, attestation.EvidenceOptions{Now: pinned, ReportData: &fakeInput}); !errors.Is(err, attestation.ErrReportData) {
				t.Fatalf("other report data: %v", err)
			}
			// The fakes know one report data only: another is an error
			// of the device (the provider answers nothing, the ioctl
			// fails), never an empty quote.
			if raw, err := b.Quote(ctx, [64]byte{1}); err == nil {
				t.Fatalf("a quote of %d bytes for report data the device does not know", len(raw))
			}
			// No sealing key: typed, so attestation.New keeps a per-boot key.
			if _, err := b.SealingKey(ctx); !errors.Is(err, attestation.ErrNoSealingKey) {
				t.Fatalf("sealing key: %v", err)
			}
		})
	}
}

// A quote provider that returns garbage is a typed error at Open, never a
// panic.
func TestGarbageQuote(t *testing.T) {
	for _, raw := range [][]byte{nil, {1, 2, 3}, bytes.Repeat([]byte{0xff}, 2000), make([]byte, tdx.MaxQuoteSize+1)} {
		_, err := device.Open(context.Background(), device.Options{QuoteProvider: staticProvider(raw)})
		if !errors.Is(err, attestation.ErrNoTEE) || !errors.Is(err, attestation.ErrMalformed) {
			t.Errorf("%d bytes: %v", len(raw), err)
		}
	}
}

type staticProvider []byte

func (p staticProvider) IsSupported() error                   { return nil }
func (p staticProvider) GetRawQuote([64]byte) ([]byte, error) { return p, nil }

func TestAbsentHardwareIsTyped(t *testing.T) {
	for _, p := range []string{device.GuestDevice, device.ConfigfsTSM} {
		if _, err := os.Stat(p); err == nil {
			t.Skipf("%s present", p)
		}
	}
	_, err := device.Open(context.Background(), device.Options{})
	if !errors.Is(err, attestation.ErrNoTEE) || !strings.Contains(err.Error(), device.GuestDevice) {
		t.Fatalf("Open without TDX: %v", err)
	}
}

// Open (the measurement quote) and a quote through go-tdx-guest's fakes:
// the cost of this package around the device, which the fakes answer at
// once (a real TD's quote generation takes far longer). TDX has no
// sealing key to measure.
func BenchmarkOpenQuote(b *testing.B) {
	ctx := context.Background()
	qp, err := tdxtest.TcQuoteProvider(tdxtest.TestCases())
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		be, err := device.Open(ctx, device.Options{QuoteProvider: qp})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := be.Quote(ctx, fakeInput); err != nil {
			b.Fatal(err)
		}
	}
}
