package sim

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-sev-guest/kds"
)

// ProductLine and ProductName of the simulated chip (an AMD EPYC Milan, B1
// stepping). Reports carry the matching CPUID family/model/stepping.
const (
	ProductLine = "Milan"
	ProductName = "Milan-B1"
)

// TCB is the security patch level of the simulated firmware; the VCEK
// certifies it and every report carries it.
var TCB = kds.TCBParts{BlSpl: 3, TeeSpl: 0, SnpSpl: 22, UcodeSpl: 213}

// Chain is a simulated ARK→ASK→VCEK chain with the VCEK's private key.
type Chain struct {
	ARK, ASK, VCEK *x509.Certificate
	vcekKey        *ecdsa.PrivateKey
	HWID           []byte
}

const (
	subdir        = "enclave-sim"
	arkFile       = "ark.der"
	askFile       = "ask.der"
	vcekFile      = "vcek.der"
	vcekKeyFile   = "vcek.key"
	sealingKeyFil = "sealing.key"
)

func amdName(cn string) pkix.Name {
	return pkix.Name{
		OrganizationalUnit: []string{"Engineering"},
		Country:            []string{"US"},
		Locality:           []string{"Santa Clara"},
		Province:           []string{"CA"},
		Organization:       []string{"Advanced Micro Devices"},
		CommonName:         cn,
	}
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func mustASN1(v any, params string) []byte {
	b, err := asn1.MarshalWithParams(v, params)
	if err != nil {
		panic(err) // integers and IA5 strings always encode
	}
	return b
}

// kdsExtensions returns the AMD KDS VCEK extensions (KDS specification,
// AMD document 57230): struct version, product name, TCB components, HWID.
func kdsExtensions(hwid []byte, tcb kds.TCBParts) []pkix.Extension {
	oid := func(tail ...int) asn1.ObjectIdentifier {
		return append(asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 3704, 1}, tail...)
	}
	u8 := func(v uint8) []byte { return mustASN1(int(v), "") }
	return []pkix.Extension{
		{Id: oid(1), Value: u8(1)},
		{Id: oid(2), Value: mustASN1(ProductName, "ia5")},
		{Id: oid(3, 1), Value: u8(tcb.BlSpl)},
		{Id: oid(3, 2), Value: u8(tcb.TeeSpl)},
		{Id: oid(3, 3), Value: u8(tcb.SnpSpl)},
		{Id: oid(3, 4), Value: u8(tcb.Spl4)},
		{Id: oid(3, 5), Value: u8(tcb.Spl5)},
		{Id: oid(3, 6), Value: u8(tcb.Spl6)},
		{Id: oid(3, 7), Value: u8(tcb.Spl7)},
		{Id: oid(3, 8), Value: u8(tcb.UcodeSpl)},
		// Like AMD's KDS, the HWID value is the raw 64 bytes.
		{Id: oid(4), Value: hwid},
	}
}

// DefaultRSABits is the size of the simulated ARK and ASK keys, as AMD's.
const DefaultRSABits = 4096

// NewChain makes a fresh chain with keys from crypto/rand, valid from an
// hour before now: ARK and ASK for 25 years, VCEK for 7 (AMD's lifetimes).
// rsaBits sizes the ARK and ASK keys; zero means DefaultRSABits.
func NewChain(now time.Time, rsaBits int) (*Chain, error) {
	if rsaBits == 0 {
		rsaBits = DefaultRSABits
	}
	if rsaBits < 2048 {
		return nil, fmt.Errorf("simulated chain: RSA keys of %d bits are too small", rsaBits)
	}
	arkKey, err := rsa.GenerateKey(rand.Reader, rsaBits)
	if err != nil {
		return nil, err
	}
	askKey, err := rsa.GenerateKey(rand.Reader, rsaBits)
	if err != nil {
		return nil, err
	}
	vcekKey, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		return nil, err
	}
	hwid := make([]byte, 64)
	if _, err := rand.Read(hwid); err != nil {
		return nil, err
	}
	nb := now.Add(-time.Hour).UTC().Truncate(time.Second)
	mk := func(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) (*x509.Certificate, error) {
		sn, err := serial()
		if err != nil {
			return nil, err
		}
		tmpl.SerialNumber = sn
		tmpl.SignatureAlgorithm = x509.SHA384WithRSAPSS
		if parent == nil {
			parent = tmpl
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
		if err != nil {
			return nil, err
		}
		return x509.ParseCertificate(der)
	}
	ark, err := mk(&x509.Certificate{
		Subject: amdName("ARK-" + ProductLine), NotBefore: nb, NotAfter: nb.AddDate(25, 0, 0),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true,
	}, nil, &arkKey.PublicKey, arkKey)
	if err != nil {
		return nil, fmt.Errorf("simulated ARK: %w", err)
	}
	ask, err := mk(&x509.Certificate{
		Subject: amdName("SEV-" + ProductLine), NotBefore: nb, NotAfter: nb.AddDate(25, 0, 0),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true,
		MaxPathLenZero: true,
	}, ark, &askKey.PublicKey, arkKey)
	if err != nil {
		return nil, fmt.Errorf("simulated ASK: %w", err)
	}
	vcek, err := mk(&x509.Certificate{
		Subject: amdName("SEV-VCEK"), NotBefore: nb, NotAfter: nb.AddDate(7, 0, 0),
		ExtraExtensions: kdsExtensions(hwid, TCB),
	}, ask, &vcekKey.PublicKey, askKey)
	if err != nil {
		return nil, fmt.Errorf("simulated VCEK: %w", err)
	}
	return &Chain{ARK: ark, ASK: ask, VCEK: vcek, vcekKey: vcekKey, HWID: hwid}, nil
}

// loadOrCreate returns the chain in dir/enclave-sim, creating it (and the
// sealing key) on first use. Creation is atomic: a fresh directory is filled
// and renamed into place, so concurrent first starts agree on one chain.
func loadOrCreate(dir string, now time.Time, rsaBits int) (*Chain, []byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("simulated enclave: data dir: %w", err)
	}
	final := filepath.Join(dir, subdir)
	if _, err := os.Stat(final); errors.Is(err, os.ErrNotExist) {
		tmp, err := os.MkdirTemp(dir, subdir+".tmp-")
		if err != nil {
			return nil, nil, fmt.Errorf("simulated enclave: %w", err)
		}
		defer os.RemoveAll(tmp) // no-op after a successful rename
		if err := create(tmp, now, rsaBits); err != nil {
			return nil, nil, err
		}
		if err := os.Rename(tmp, final); err != nil {
			if _, statErr := os.Stat(final); statErr != nil {
				return nil, nil, fmt.Errorf("simulated enclave: %w", err)
			}
			// Another process won the race; use its chain.
		}
	}
	return load(final)
}

func create(dir string, now time.Time, rsaBits int) error {
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	c, err := NewChain(now, rsaBits)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(c.vcekKey)
	if err != nil {
		return err
	}
	sealing := make([]byte, 32)
	if _, err := rand.Read(sealing); err != nil {
		return err
	}
	// The ARK and ASK private keys are not kept: the chain never needs to
	// issue again, and a key that is not stored cannot leak.
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{arkFile, c.ARK.Raw, 0o644},
		{askFile, c.ASK.Raw, 0o644},
		{vcekFile, c.VCEK.Raw, 0o644},
		{vcekKeyFile, keyDER, 0o600},
		{sealingKeyFil, sealing, 0o600},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return fmt.Errorf("simulated enclave: %w", err)
		}
	}
	return nil
}

func load(dir string) (*Chain, []byte, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("simulated enclave: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, nil, fmt.Errorf("simulated enclave: %s is accessible to other users (mode %v); want 0700", dir, fi.Mode().Perm())
	}
	read := func(name string, secret bool) ([]byte, error) {
		p := filepath.Join(dir, name)
		if secret {
			fi, err := os.Stat(p)
			if err != nil {
				return nil, err
			}
			if fi.Mode().Perm()&0o077 != 0 {
				return nil, fmt.Errorf("%s is accessible to other users (mode %v); want 0600", p, fi.Mode().Perm())
			}
		}
		return os.ReadFile(p)
	}
	var c Chain
	for _, f := range []struct {
		name string
		dst  **x509.Certificate
	}{{arkFile, &c.ARK}, {askFile, &c.ASK}, {vcekFile, &c.VCEK}} {
		der, err := read(f.name, false)
		if err != nil {
			return nil, nil, fmt.Errorf("simulated enclave: %w", err)
		}
		if *f.dst, err = x509.ParseCertificate(der); err != nil {
			return nil, nil, fmt.Errorf("simulated enclave: %s: %w", f.name, err)
		}
	}
	keyDER, err := read(vcekKeyFile, true)
	if err != nil {
		return nil, nil, fmt.Errorf("simulated enclave: %w", err)
	}
	k, err := x509.ParsePKCS8PrivateKey(keyDER)
	if err != nil {
		return nil, nil, fmt.Errorf("simulated enclave: VCEK key does not parse")
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok || ek.Curve != elliptic.P384() || !ek.PublicKey.Equal(c.VCEK.PublicKey) {
		return nil, nil, fmt.Errorf("simulated enclave: VCEK key does not match the VCEK certificate")
	}
	c.vcekKey = ek
	exts, err := kds.VcekCertificateExtensions(c.VCEK)
	if err != nil {
		return nil, nil, fmt.Errorf("simulated enclave: VCEK: %w", err)
	}
	c.HWID = exts.HWID
	sealing, err := read(sealingKeyFil, true)
	if err != nil {
		return nil, nil, fmt.Errorf("simulated enclave: %w", err)
	}
	if len(sealing) != 32 {
		return nil, nil, fmt.Errorf("simulated enclave: sealing key is %d bytes, want 32", len(sealing))
	}
	return &c, sealing, nil
}
