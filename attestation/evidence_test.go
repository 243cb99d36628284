package attestation_test

import (
	"crypto/x509"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation"
)

func TestCertificatesWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	leaf := &x509.Certificate{NotBefore: t0.Add(time.Hour), NotAfter: t0.Add(48 * time.Hour)}
	root := &x509.Certificate{NotBefore: t0, NotAfter: t0.Add(24 * time.Hour)}
	nb, na := attestation.CertificatesWindow(leaf, root)
	if !nb.Equal(leaf.NotBefore) || !na.Equal(root.NotAfter) {
		t.Fatalf("window %s to %s", nb, na)
	}
	v := attestation.VerifiedEvidence{NotBefore: nb, NotAfter: na}
	if !v.ValidAt(t0.Add(2*time.Hour)) || v.ValidAt(t0) || v.ValidAt(t0.Add(25*time.Hour)) {
		t.Fatal("ValidAt disagrees with the window")
	}
	if nb, na := attestation.CertificatesWindow(); !nb.IsZero() || !na.IsZero() {
		t.Fatal("no certificates: not an open window")
	}
	if open := (attestation.VerifiedEvidence{}); !open.ValidAt(t0) {
		t.Fatal("an open window refuses a time")
	}
}
