package manifest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"strings"
	"time"
)

// Description is the JSON form of a manifest that `acds manifest sign`
// reads. Measurements are lowercase or uppercase hex (what `acds measure`
// prints); notary keys are 32-byte Ed25519 public keys in hex or standard
// base64 (what `acds notary` prints). Example:
//
//	{
//	  "issuer": "ACDS release team",
//	  "notBefore": "2026-01-01T00:00:00Z",
//	  "notAfter": "2027-01-01T00:00:00Z",
//	  "profiles": {
//	    "sev-snp": {"measurements": ["5f1c…"], "minimumTcb": {"bootloader": 3, "tee": 0, "snp": 22, "microcode": 213}},
//	    "sev-snp-sim": {"measurements": ["a2b4…"]}
//	  },
//	  "notaryKeys": ["3q2+7w…"]
//	}
type Description struct {
	Issuer    string                        `json:"issuer"`
	NotBefore time.Time                     `json:"notBefore"`
	NotAfter  time.Time                     `json:"notAfter"`
	Profiles  map[string]ProfileDescription `json:"profiles"`
	// NotaryKeys are Ed25519 public keys: PEM (as acds notary prints
	// them), or hex or base64 (see ParsePublicKey).
	NotaryKeys []string `json:"notaryKeys,omitempty"`
}

// ProfileDescription is one profile of a [Description].
type ProfileDescription struct {
	Measurements []string `json:"measurements"`
	MinimumTCB   *TCB     `json:"minimumTcb,omitempty"`
}

// ParseDescription reads a JSON manifest description strictly (unknown
// fields are errors) and returns the manifest it describes.
func ParseDescription(data []byte) (*Manifest, error) {
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%w: description too large", ErrInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var d Description
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the description", ErrInvalid)
	}
	m := &Manifest{Issuer: d.Issuer, NotBefore: d.NotBefore, NotAfter: d.NotAfter, Profiles: map[string]Profile{}}
	for name, p := range d.Profiles {
		var mp Profile
		for _, h := range p.Measurements {
			b, err := hex.DecodeString(h)
			if err != nil {
				return nil, fmt.Errorf("%w: profile %s: measurement %q is not hex", ErrInvalid, name, h)
			}
			mp.Measurements = append(mp.Measurements, b)
		}
		mp.MinimumTCB = p.MinimumTCB
		m.Profiles[name] = mp
	}
	for _, k := range d.NotaryKeys {
		pub, err := ParsePublicKey(k)
		if err != nil {
			return nil, err
		}
		m.NotaryKeys = append(m.NotaryKeys, pub)
	}
	if _, err := m.toWire(); err != nil {
		return nil, err
	}
	return m, nil
}

// ParsePublicKey reads an Ed25519 public key written as a PEM "PUBLIC
// KEY" block (what acds notary prints), as the 32 key bytes in hex or
// standard/URL base64 (padded or not), or as the base64 of the PEM's
// PKIX body.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	s = strings.TrimSpace(s)
	if block, _ := pem.Decode([]byte(s)); block != nil {
		pub, err := parsePEMPublicKey(block)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		return pub, nil
	}
	if b, err := hex.DecodeString(s); err == nil && len(b) == ed25519.PublicKeySize {
		return b, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		b, err := enc.DecodeString(s)
		if err != nil {
			continue
		}
		if len(b) == ed25519.PublicKeySize {
			return b, nil
		}
		if k, err := x509.ParsePKIXPublicKey(b); err == nil {
			if pub, ok := k.(ed25519.PublicKey); ok {
				return pub, nil
			}
		}
	}
	// The text is not quoted: a private key given by mistake would land
	// in the message, and from there in a log.
	return nil, fmt.Errorf("%w: %d characters that are not an Ed25519 public key (PEM, or hex or base64)", ErrInvalid, len(s))
}
