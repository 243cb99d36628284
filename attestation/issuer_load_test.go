package attestation_test

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation"
)

func TestLoadIssuer(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	pemFiles := func(name string, ca *attestation.Issuer) (certFile, keyFile string, keyPEM []byte) {
		p8, err := x509.MarshalPKCS8PrivateKey(ca.Signer)
		if err != nil {
			t.Fatal(err)
		}
		keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8})
		certFile = write(name+".crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Certificate.Raw}), 0o644)
		return certFile, write(name+".key", keyPEM, 0o600), keyPEM
	}
	now := issued
	cert, key, keyPEM := pemFiles("ca", testCA(t, "operator root", nil, now.Add(-time.Hour), now.Add(time.Hour)))
	got, err := attestation.LoadIssuer(cert, key, now)
	if err != nil || got.Certificate.Subject.CommonName != "operator root" {
		t.Fatalf("LoadIssuer: %v", err)
	}

	openKey := write("open.key", keyPEM, 0o644)
	_, otherKey, _ := pemFiles("other", testCA(t, "other root", nil, now.Add(-time.Hour), now.Add(time.Hour)))
	big := write("big.crt", bytes.Repeat([]byte("A"), attestation.MaxIssuerPEMSize+1), 0o644)
	for name, tc := range map[string]struct {
		cert, key string
		at        time.Time
		want      error
	}{
		"world-readable key": {cert, openKey, now, attestation.ErrKeyFileMode},
		"missing key":        {cert, filepath.Join(dir, "none.key"), now, fs.ErrNotExist},
		"missing cert":       {filepath.Join(dir, "none.crt"), key, now, fs.ErrNotExist},
		"oversized cert":     {big, key, now, attestation.ErrTooLarge},
		"key of another CA":  {cert, otherKey, now, attestation.ErrIssuer},
		"expired":            {cert, key, now.Add(2 * time.Hour), attestation.ErrIssuer},
		"key as certificate": {key, key, now, nil},
	} {
		_, err := attestation.LoadIssuer(tc.cert, tc.key, tc.at)
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), strings.Split(string(keyPEM), "\n")[1]) {
			t.Errorf("%s: the error carries the private key", name)
		}
	}
}
