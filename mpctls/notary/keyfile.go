package notary

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// LoadOrCreateKey reads the notary signing key stored at path (the PEM
// form of MarshalPrivateKey), or, when no file exists there, generates a
// key and writes it with mode 0600, never overwriting a file. created says
// which happened. A key file readable or writable by group or others is
// refused, since anyone who reads it can sign statements in the notary's
// name. Errors name the file, never the key.
func LoadOrCreateKey(path string) (key ed25519.PrivateKey, created bool, err error) {
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
		key, err := ParsePrivateKey(b)
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
	b, err := MarshalPrivateKey(key)
	if err != nil {
		return nil, false, err
	}
	defer clear(b)
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("key file: %w", err)
	}
	if _, err := out.Write(b); err != nil {
		out.Close()
		os.Remove(path)
		return nil, false, fmt.Errorf("key file: %w", err)
	}
	if err := out.Close(); err != nil {
		os.Remove(path)
		return nil, false, fmt.Errorf("key file: %w", err)
	}
	return key, true, nil
}
