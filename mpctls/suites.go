package mpctls

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	_ "crypto/sha256" // registers crypto.SHA256
	_ "crypto/sha512" // registers crypto.SHA384
	"fmt"

	"golang.org/x/crypto/chacha20poly1305"
)

// TLS protocol versions.
const (
	VersionTLS12 uint16 = 0x0303
	VersionTLS13 uint16 = 0x0304
)

// Suite describes one of the AEAD cipher suites this package accepts.
type Suite struct {
	ID      uint16      // IANA code point
	Name    string      // IANA name
	Version uint16      // VersionTLS12 or VersionTLS13
	Hash    crypto.Hash // transcript / HKDF / PRF hash
	KeyLen  int         // AEAD key length
	// IVLen is the length of the write IV: 12 for TLS 1.3 and for TLS 1.2
	// ChaCha20-Poly1305, 4 (the implicit salt) for TLS 1.2 AES-GCM.
	IVLen int
	// ECDSA reports, for TLS 1.2, that the suite needs an ECDSA server
	// certificate (ECDHE_ECDSA); otherwise ECDHE_RSA.
	ECDSA  bool
	chacha bool
}

var suites = []Suite{
	{ID: 0x1301, Name: "TLS_AES_128_GCM_SHA256", Version: VersionTLS13, Hash: crypto.SHA256, KeyLen: 16, IVLen: 12},
	{ID: 0x1302, Name: "TLS_AES_256_GCM_SHA384", Version: VersionTLS13, Hash: crypto.SHA384, KeyLen: 32, IVLen: 12},
	{ID: 0x1303, Name: "TLS_CHACHA20_POLY1305_SHA256", Version: VersionTLS13, Hash: crypto.SHA256, KeyLen: 32, IVLen: 12, chacha: true},
	{ID: 0xc02b, Name: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", Version: VersionTLS12, Hash: crypto.SHA256, KeyLen: 16, IVLen: 4, ECDSA: true},
	{ID: 0xc02c, Name: "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", Version: VersionTLS12, Hash: crypto.SHA384, KeyLen: 32, IVLen: 4, ECDSA: true},
	{ID: 0xc02f, Name: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", Version: VersionTLS12, Hash: crypto.SHA256, KeyLen: 16, IVLen: 4},
	{ID: 0xc030, Name: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", Version: VersionTLS12, Hash: crypto.SHA384, KeyLen: 32, IVLen: 4},
	{ID: 0xcca8, Name: "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", Version: VersionTLS12, Hash: crypto.SHA256, KeyLen: 32, IVLen: 12, chacha: true},
	{ID: 0xcca9, Name: "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", Version: VersionTLS12, Hash: crypto.SHA256, KeyLen: 32, IVLen: 12, ECDSA: true, chacha: true},
}

// Suites returns the cipher suites this package accepts, TLS 1.3 first.
func Suites() []Suite { return append([]Suite(nil), suites...) }

// SuiteByID returns the accepted suite with the given code point, for
// either version. Anything else (CBC, RC4, RSA key exchange, …) wraps
// ErrUnsupported.
func SuiteByID(id uint16) (Suite, error) {
	for _, s := range suites {
		if s.ID == id {
			return s, nil
		}
	}
	return Suite{}, fmt.Errorf("%w: cipher suite %#04x", ErrUnsupported, id)
}

func suiteFor(version, id uint16) (Suite, error) {
	if version != VersionTLS12 && version != VersionTLS13 {
		return Suite{}, fmt.Errorf("%w: tls version %#04x", ErrUnsupported, version)
	}
	s, err := SuiteByID(id)
	if err != nil {
		return Suite{}, err
	}
	if s.Version != version {
		return Suite{}, fmt.Errorf("%w: cipher suite %s with version %#04x", ErrUnsupported, s.Name, version)
	}
	return s, nil
}

// aead returns the record AEAD keyed with key.
func (s Suite) aead(key []byte) (cipher.AEAD, error) {
	if len(key) != s.KeyLen {
		return nil, fmt.Errorf("%w: %s key of %d bytes", ErrDecrypt, s.Name, len(key))
	}
	if s.chacha {
		return chacha20poly1305.New(key)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
