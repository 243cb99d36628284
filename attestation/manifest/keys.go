package manifest

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// ErrKey marks an unusable key file.
var ErrKey = errors.New("manifest: bad key file")

// LoadOrCreateKey reads an Ed25519 private key (PEM "PRIVATE KEY", PKCS #8,
// as `openssl genpkey -algorithm ed25519` writes) from path. When path does
// not exist it creates a fresh key there (mode 0600, never overwriting) and
// reports created = true, so a first `acds manifest sign` makes the
// publisher's key. An existing key file readable by group or others is
// refused.
func LoadOrCreateKey(path string) (key ed25519.PrivateKey, created bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, false, err
		}
		der, err := x509.MarshalPKCS8PrivateKey(priv)
		if err != nil {
			return nil, false, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, false, fmt.Errorf("creating key: %w", err)
		}
		if err := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
			f.Close()
			return nil, false, fmt.Errorf("writing key: %w", err)
		}
		if err := f.Close(); err != nil {
			return nil, false, fmt.Errorf("writing key: %w", err)
		}
		return priv, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading key: %w", err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, false, fmt.Errorf("%w: %s is accessible to other users (mode %v); want 0600", ErrKey, path, fi.Mode().Perm())
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, false, fmt.Errorf("%w: %s is not a PEM PRIVATE KEY", ErrKey, path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s does not parse", ErrKey, path)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, false, fmt.Errorf("%w: %s is not an Ed25519 key", ErrKey, path)
	}
	return priv, false, nil
}

// MarshalPublicKey returns pub as PEM "PUBLIC KEY" (PKIX).
func MarshalPublicKey(pub ed25519.PublicKey) []byte {
	der, _ := x509.MarshalPKIXPublicKey(pub) // cannot fail for Ed25519
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// ReadPublicKey reads an Ed25519 public key file: PEM "PUBLIC KEY" (PKIX),
// or a single line of hex or base64.
func ReadPublicKey(path string) (ed25519.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading public key: %w", err)
	}
	if len(data) > 16<<10 {
		return nil, fmt.Errorf("%w: %s is too large", ErrKey, path)
	}
	pub, err := ParsePublicKey(string(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrKey, path, err)
	}
	return pub, nil
}

// parsePEMPublicKey reads a PEM block, which must be a PKIX "PUBLIC KEY"
// holding an Ed25519 key.
func parsePEMPublicKey(block *pem.Block) (ed25519.PublicKey, error) {
	if block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("holds a %s, want a PUBLIC KEY", block.Type)
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("does not parse as a public key")
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("is not an Ed25519 key")
	}
	return pub, nil
}
