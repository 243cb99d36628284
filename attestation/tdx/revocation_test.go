package tdx

import (
	"bytes"
	"crypto/rand"
	"crypto/x509"
	"math/big"
	"slices"
	"testing"
	"time"
)

func crlCollateral(t testing.TB) *Collateral {
	return &Collateral{PCKCRL: readTestdata(t, "pckcrl.der"), RootCRL: readTestdata(t, "rootcrl.der")}
}

func TestRevocationIntelCRLs(t *testing.T) {
	quote := sprQuote(t)
	ev, err := Verify(quote, Options{Now: at(pinned), Collateral: crlCollateral(t)})
	if err != nil {
		t.Fatalf("Verify with Intel's CRLs = %v", err)
	}
	if !slices.Contains(ev.Checked, CheckRevocation) {
		t.Errorf("Checked = %v lacks revocation", ev.Checked)
	}
	// Together with the TCB collateral.
	c := sampleCollateral(t)
	c.PCKCRL, c.RootCRL = crlCollateral(t).PCKCRL, crlCollateral(t).RootCRL
	_, err = Verify(quote, Options{Now: at(pinned), Collateral: c})
	wantErr(t, err, ErrTCB, CheckTCBLevel)

	// One CRL alone is refused.
	_, err = Verify(quote, Options{Now: at(pinned), Collateral: &Collateral{PCKCRL: crlCollateral(t).PCKCRL}})
	wantErr(t, err, ErrCollateral, CheckRevocation)
	// A changed CRL no longer carries the CA's signature.
	bad := crlCollateral(t)
	bad.PCKCRL = bytes.Clone(bad.PCKCRL)
	bad.PCKCRL[len(bad.PCKCRL)-80] ^= 1
	_, err = Verify(quote, Options{Now: at(pinned), Collateral: bad})
	wantErr(t, err, ErrCollateral, CheckRevocation)
	// Swapped CRLs are signed by the wrong CA.
	swapped := &Collateral{PCKCRL: crlCollateral(t).RootCRL, RootCRL: crlCollateral(t).PCKCRL}
	_, err = Verify(quote, Options{Now: at(pinned), Collateral: swapped})
	wantErr(t, err, ErrCollateral, CheckRevocation)
	// Past the PCK CRL's nextUpdate (2023-07-08), while the certificates are
	// still valid.
	_, err = Verify(quote, Options{Now: at(time.Date(2023, 7, 20, 0, 0, 0, 0, time.UTC)), Collateral: crlCollateral(t)})
	wantErr(t, err, ErrCollateral, CheckRevocation)
}

func TestRevokedCertificate(t *testing.T) {
	ca, key := testCA(t, "Test PCK CA")
	leaf := &x509.Certificate{SerialNumber: big.NewInt(77)}
	der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{
		Number:     big.NewInt(1),
		ThisUpdate: pinned.Add(-time.Hour),
		NextUpdate: pinned.Add(time.Hour),
		RevokedCertificateEntries: []x509.RevocationListEntry{
			{SerialNumber: big.NewInt(5), RevocationTime: pinned.Add(-2 * time.Hour)},
			{SerialNumber: big.NewInt(77), RevocationTime: pinned.Add(-2 * time.Hour)},
		},
	}, ca, key)
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, checkCRL(der, "PCK CRL", ca, leaf, pinned), ErrCertificate, CheckRevocation)
	if err := checkCRL(der, "PCK CRL", ca, &x509.Certificate{SerialNumber: big.NewInt(78)}, pinned); err != nil {
		t.Errorf("unrevoked certificate: %v", err)
	}
}
