package server

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Tokens are "acds_" + base64url(32 random bytes) without padding: 48
// characters. The server stores only their SHA-256.
const (
	tokenPrefix = "acds_"
	tokenLen    = len(tokenPrefix) + 43
)

func newToken() (token string, hash []byte, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, fmt.Errorf("token: %w", err)
	}
	token = tokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	h := sha256.Sum256([]byte(token))
	return token, h[:], nil
}

// parseToken checks a bearer token's shape and returns its SHA-256.
func parseToken(token string) ([]byte, bool) {
	if len(token) != tokenLen || !strings.HasPrefix(token, tokenPrefix) {
		return nil, false
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(token[len(tokenPrefix):])
	if err != nil || len(raw) != 32 {
		return nil, false
	}
	h := sha256.Sum256([]byte(token))
	return h[:], true
}

var pseudonymEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newPseudonym returns "anon_" + 26 base32 characters (128 random bits).
func newPseudonym() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("pseudonym: %w", err)
	}
	return "anon_" + pseudonymEncoding.EncodeToString(b[:]), nil
}

// validPseudonym reports whether s has the shape newPseudonym produces.
func validPseudonym(s string) bool {
	rest, ok := strings.CutPrefix(s, "anon_")
	if !ok || len(rest) != 26 {
		return false
	}
	_, err := pseudonymEncoding.DecodeString(rest)
	return err == nil
}

// Sessions in the store: the store keeps one row per pseudonym, but a
// recovered pseudonym needs a second session. Each session row is
// therefore keyed "<pseudonym>.<session tag>"; the owner of requests is the
// pseudonym before the dot.
func sessionKey(pseudonym string) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("session: %w", err)
	}
	return pseudonym + "." + pseudonymEncoding.EncodeToString(b[:]), nil
}

// Argon2id parameters for recovery passphrases (OWASP's 19 MiB, t=2, p=1).
const (
	argonTime    = 2
	argonMemory  = 19 * 1024 // KiB
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

var errBadHash = errors.New("malformed passphrase hash")

// hashPassphrase returns the PHC-style encoding
// $argon2id$v=19$m=<KiB>,t=<n>,p=<n>$<salt>$<hash> (base64 raw std).
func hashPassphrase(passphrase string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("passphrase salt: %w", err)
	}
	key := argon2.IDKey([]byte(passphrase), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key)), nil
}

// checkPassphrase compares passphrase with an encoded hash in constant time.
func checkPassphrase(passphrase, encoded string) (bool, error) {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, errBadHash
	}
	var v int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &v); err != nil || v != argon2.Version {
		return false, errBadHash
	}
	var m, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil || m == 0 || m > 1<<20 || t == 0 || t > 16 || p == 0 {
		return false, errBadHash
	}
	salt, err := base64.RawStdEncoding.DecodeString(parts[4])
	if err != nil {
		return false, errBadHash
	}
	want, err := base64.RawStdEncoding.DecodeString(parts[5])
	if err != nil || len(want) == 0 || len(want) > 64 {
		return false, errBadHash
	}
	got := argon2.IDKey([]byte(passphrase), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// dummyPassphraseHash is checked against when a pseudonym is unknown, so a
// recover attempt costs the same whether or not the pseudonym exists.
const dummyPassphraseHash = "$argon2id$v=19$m=19456,t=2,p=1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
