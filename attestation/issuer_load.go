package attestation

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// ErrKeyFileMode: a private key file may be read by group or others.
var ErrKeyFileMode = errors.New("attestation: key file readable by group or others")

// LoadIssuer reads the operator CA of a PEM certificate file (the CA
// certificate, then its chain) and a PEM private key file, as
// [ParseIssuer] parses them, and checks it at now ([Issuer.Check]). The key
// file must not be readable by group or others ([ErrKeyFileMode]); each
// file is read up to MaxIssuerPEMSize bytes ([ErrTooLarge]). Errors name
// the files, never the key's content, and wrap ErrKeyFileMode,
// ErrTooLarge, ErrMalformed, ErrIssuer or the file system's error. The
// key's PEM bytes are cleared once parsed.
func LoadIssuer(certPath, keyPath string, now time.Time) (*Issuer, error) {
	fi, err := os.Stat(keyPath)
	if err != nil {
		return nil, err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%s: mode %04o lets group or others read it; chmod 600 it: %w", keyPath, perm, ErrKeyFileMode)
	}
	certPEM, err := readLimited(certPath, MaxIssuerPEMSize)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readLimited(keyPath, MaxIssuerPEMSize)
	if err != nil {
		return nil, err
	}
	ca, err := ParseIssuer(certPEM, keyPEM)
	clear(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s, %s: %w", certPath, keyPath, err)
	}
	if err := ca.Check(now); err != nil {
		return nil, fmt.Errorf("%s: %w", certPath, err)
	}
	return ca, nil
}

// readLimited reads a file of at most limit bytes.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		clear(b)
		return nil, fmt.Errorf("%s is larger than %d bytes: %w", path, limit, ErrTooLarge)
	}
	return b, nil
}
