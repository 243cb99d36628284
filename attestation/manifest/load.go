package manifest

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

var (
	// ErrKeyRequired: the file is a signed manifest and no publisher key
	// was given to check it.
	ErrKeyRequired = errors.New("manifest: no publisher key given")
	// ErrKeyNotApplicable: the file is an unsigned JSON description, and a
	// publisher key was given as if it were signed.
	ErrKeyNotApplicable = errors.New("manifest: a publisher key applies to signed manifests only")
)

// Load reads the manifest file at path: a signed manifest (what [Sign]
// writes), checked with the publisher's public key in the file keyPath (as
// [ReadPublicKey] reads it) and the time now; or, when keyPath is "", a
// JSON [Description] that the caller vouches for. signed says which it
// was. Its errors name the files and say which of the two forms the file
// is not, or why it fails: [ErrKeyRequired], [ErrKeyNotApplicable],
// [ErrKey], [ErrSignature], [ErrInvalid], [ErrNotYetValid], [ErrExpired],
// or the file system's. The file is read up to MaxSize bytes.
func Load(path, keyPath string, now time.Time) (m *Manifest, signed bool, err error) {
	data, err := readFile(path, MaxSize)
	if err != nil {
		return nil, false, err
	}
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		if keyPath != "" {
			return nil, false, fmt.Errorf("%s is an unsigned JSON description: %w", path, ErrKeyNotApplicable)
		}
		m, err := ParseDescription(data)
		if err != nil {
			return nil, false, fmt.Errorf("%s is not a valid JSON manifest description: %w", path, err)
		}
		return m, false, nil
	}
	if err := CheckSigned(data); err != nil {
		return nil, false, fmt.Errorf("%s is not a manifest: neither a signed manifest (acds manifest sign) nor a JSON manifest description: %w", path, err)
	}
	if keyPath == "" {
		return nil, true, fmt.Errorf("%s is a signed manifest: give the publisher's public key: %w", path, ErrKeyRequired)
	}
	pub, err := ReadPublicKey(keyPath)
	if err != nil {
		return nil, true, err
	}
	m, err = Verify(data, pub, now)
	switch {
	case errors.Is(err, ErrSignature):
		return nil, true, fmt.Errorf("%s is a signed manifest, but its signature does not verify with the key in %s: %w", path, keyPath, err)
	case err != nil:
		return nil, true, fmt.Errorf("%s: %w", path, err)
	}
	return m, true, nil
}

// readFile reads at most limit+1 bytes of path: the parsers refuse more.
func readFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit+1))
}

// Description returns m in its JSON description form, the form
// [ParseDescription] reads: measurements in lowercase hex, notary keys in
// standard base64.
func (m *Manifest) Description() Description {
	d := Description{Issuer: m.Issuer, NotBefore: m.NotBefore, NotAfter: m.NotAfter, Profiles: map[string]ProfileDescription{}}
	for n, p := range m.Profiles {
		var pd ProfileDescription
		for _, x := range p.Measurements {
			pd.Measurements = append(pd.Measurements, hex.EncodeToString(x))
		}
		pd.MinimumTCB = p.MinimumTCB
		d.Profiles[n] = pd
	}
	for _, k := range m.NotaryKeys {
		d.NotaryKeys = append(d.NotaryKeys, base64.StdEncoding.EncodeToString(k))
	}
	return d
}
