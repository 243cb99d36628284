package service_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/portal"
	"github.com/acds-project/acds/service"
)

// writeFile writes b to dir/name with mode (past the umask).
func writeFile(t *testing.T, dir, name string, b []byte, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// testCA returns a CA certificate and its private key, both PEM.
func testCA(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "files test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	p8, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8})
}

// TestFilesLoad: every named file lands in its option, and the operator
// CA comes back checked.
func TestFilesLoad(t *testing.T) {
	dir := t.TempDir()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM, err := notary.MarshalPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM := testCA(t)
	f := service.Files{
		NotaryKey:     writeFile(t, dir, "notary.pub", pubPEM, 0o644),
		Registrations: writeFile(t, dir, "regs.json", []byte(`[{"origin": "https://portal.example", "clientId": "acds", "redirectUri": "https://acds.example/cb"}]`), 0o644),
		PortalCA:      writeFile(t, dir, "portal-ca.pem", certPEM, 0o644),
		TLSCACert:     writeFile(t, dir, "ca.crt", certPEM, 0o644),
		TLSCAKey:      writeFile(t, dir, "ca.key", keyPEM, 0o600),
	}
	o := service.Options{TLS: true}
	issuer, err := f.Load(&o, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Equal(o.NotaryKey) || string(o.PortalCA) != string(certPEM) || o.PortalRegistrations["https://portal.example"].ClientID != "acds" {
		t.Errorf("options %+v", o)
	}
	if issuer == nil || issuer.Certificate.Subject.CommonName != "files test CA" {
		t.Errorf("issuer %+v", issuer)
	}

	// Nothing named: nothing read, no issuer.
	o = service.Options{}
	if issuer, err := (service.Files{}).Load(&o, time.Now()); err != nil || issuer != nil || o.NotaryKey != nil || o.PortalCA != nil || o.PortalRegistrations != nil {
		t.Errorf("empty Files: issuer %v, err %v, options %+v", issuer, err, o)
	}
}

// TestFilesLoadErrors: a missing file, bad PEM and a key file others can
// read are refused, each with an error naming the file and never quoting
// a key.
func TestFilesLoadErrors(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM := testCA(t)
	_, otherKeyPEM := testCA(t)
	secrets := [][]byte{keyPEM, otherKeyPEM}
	cert := writeFile(t, dir, "ca.crt", certPEM, 0o644)
	key := writeFile(t, dir, "ca.key", keyPEM, 0o600)
	openKey := writeFile(t, dir, "open.key", otherKeyPEM, 0o644)
	privAsPub := writeFile(t, dir, "priv.pem", keyPEM, 0o600) // a private key where a public key or certificate belongs
	garbage := writeFile(t, dir, "garbage.pem", []byte("not PEM at all\n"), 0o644)
	big := writeFile(t, dir, "big.pem", make([]byte, service.MaxOptionFileSize+1), 0o644)
	missing := filepath.Join(dir, "missing.pem")
	regKey := writeFile(t, dir, "reg.key", otherKeyPEM, 0o644)
	openRegs := writeFile(t, dir, "open-regs.json", []byte(`[{"origin": "https://portal.example", "clientId": "acds",
		"redirectUri": "https://acds.example/cb", "privateKeyFile": "`+filepath.Base(regKey)+`"}]`), 0o644)
	badRegs := writeFile(t, dir, "bad-regs.json", []byte(`[{"origin": "https://portal.example", "redirectUri": "https://acds.example/cb"}]`), 0o644)

	for _, c := range []struct {
		name  string
		files service.Files
		tls   bool
		is    error  // the error wraps it, when not nil
		names string // the file the error names
	}{
		{"notary key missing", service.Files{NotaryKey: missing}, false, fs.ErrNotExist, missing},
		{"notary key not PEM", service.Files{NotaryKey: garbage}, false, notary.ErrKey, garbage},
		{"notary key a private key", service.Files{NotaryKey: privAsPub}, false, notary.ErrKey, privAsPub},
		{"notary key too large", service.Files{NotaryKey: big}, false, nil, big},
		{"portal CA missing", service.Files{PortalCA: missing}, false, fs.ErrNotExist, missing},
		{"portal CA not PEM", service.Files{PortalCA: garbage}, false, service.ErrInvalidOptions, garbage},
		{"portal CA a private key", service.Files{PortalCA: privAsPub}, false, service.ErrInvalidOptions, privAsPub},
		{"registrations missing", service.Files{Registrations: missing}, false, fs.ErrNotExist, missing},
		{"registrations invalid", service.Files{Registrations: badRegs}, false, nil, badRegs},
		{"registration key others can read", service.Files{Registrations: openRegs}, false, nil, regKey},
		{"TLS CA cert without key", service.Files{TLSCACert: cert}, true, service.ErrTLSCA, ""},
		{"TLS CA key without cert", service.Files{TLSCAKey: key}, true, service.ErrTLSCA, ""},
		{"TLS CA without TLS", service.Files{TLSCACert: cert, TLSCAKey: key}, false, service.ErrTLSCA, ""},
		{"TLS CA key missing", service.Files{TLSCACert: cert, TLSCAKey: missing}, true, fs.ErrNotExist, missing},
		{"TLS CA cert missing", service.Files{TLSCACert: missing, TLSCAKey: key}, true, fs.ErrNotExist, missing},
		{"TLS CA key others can read", service.Files{TLSCACert: cert, TLSCAKey: openKey}, true, attestation.ErrKeyFileMode, openKey},
		{"TLS CA cert not PEM", service.Files{TLSCACert: garbage, TLSCAKey: key}, true, nil, garbage},
		{"TLS CA cert a private key", service.Files{TLSCACert: privAsPub, TLSCAKey: key}, true, nil, privAsPub},
		{"TLS CA key of another CA", service.Files{TLSCACert: cert, TLSCAKey: writeFile(t, dir, "other.key", otherKeyPEM, 0o600)}, true, nil, cert},
	} {
		o := service.Options{TLS: c.tls}
		issuer, err := c.files.Load(&o, time.Now())
		if err == nil || issuer != nil {
			t.Errorf("%s: issuer %v, err %v", c.name, issuer, err)
			continue
		}
		if c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s: %v, want it to wrap %v", c.name, err, c.is)
		}
		if !strings.Contains(err.Error(), c.names) {
			t.Errorf("%s: %v does not name %s", c.name, err, c.names)
		}
		for _, s := range secrets {
			for _, line := range strings.Split(string(s), "\n")[1:3] {
				if strings.Contains(err.Error(), line) {
					t.Errorf("%s: the error quotes a private key: %v", c.name, err)
				}
			}
		}
	}
	var re *portal.RegistrationError
	if _, err := (service.Files{Registrations: badRegs}).Load(&service.Options{}, time.Now()); !errors.As(err, &re) {
		t.Errorf("invalid registrations: %v, want a *portal.RegistrationError", err)
	}
}
