package service

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/mpctls/notary"
)

// deidentificationKey returns the 32-byte HMAC key for de-identification
// pseudonyms. It is made once per installation and kept in path sealed by
// the enclave, so the same installation pseudonymises consistently and the
// key is never at rest in the clear.
func deidentificationKey(e *attestation.Enclave, path string) ([]byte, error) {
	const ad = "acds/v1/deidentification-key"
	if sealed, err := os.ReadFile(path); err == nil {
		key, err := e.Open(sealed, []byte(ad))
		if err != nil {
			return nil, fmt.Errorf("de-identification key %s: %w", path, err)
		}
		return key, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("de-identification key: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	sealed, err := e.Seal(key, []byte(ad))
	if err != nil {
		return nil, err
	}
	if err := writeNew(path, sealed); err != nil {
		return nil, fmt.Errorf("de-identification key: %w", err)
	}
	return key, nil
}

// notaryKey reads the in-process notary's signing key at path, or creates
// one there (mode 0600, never overwriting) when the file does not exist. A
// key file readable by group or others is refused. Errors never contain
// the key.
func notaryKey(path string) (key ed25519.PrivateKey, created bool, err error) {
	f, err := os.Open(path)
	if err == nil {
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return nil, false, fmt.Errorf("key file: %w", err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			return nil, false, fmt.Errorf("key file %s is accessible by group or others (mode %v); chmod 600 it", path, st.Mode().Perm())
		}
		b, err := io.ReadAll(io.LimitReader(f, 64<<10))
		if err != nil {
			return nil, false, fmt.Errorf("key file: %w", err)
		}
		key, err := notary.ParsePrivateKey(b)
		clear(b)
		if err != nil {
			return nil, false, fmt.Errorf("key file %s: %w", path, err)
		}
		return key, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("key file: %w", err)
	}
	_, key, err = ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, false, err
	}
	b, err := notary.MarshalPrivateKey(key)
	if err != nil {
		return nil, false, err
	}
	defer clear(b)
	if err := writeNew(path, b); err != nil {
		return nil, false, fmt.Errorf("key file: %w", err)
	}
	return key, true, nil
}

// writeNew creates path with mode 0600 and writes b to it; it never
// overwrites an existing file and removes a partly written one.
func writeNew(path string, b []byte) error {
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := out.Write(b); err != nil {
		out.Close()
		os.Remove(path)
		return err
	}
	if err := out.Close(); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}
