package mpctls

import (
	"crypto"
	"crypto/hkdf"
	"crypto/hmac"
	"errors"
	"fmt"
	"hash"
)

// HKDFExpandLabel is the TLS 1.3 HKDF-Expand-Label function (RFC 8446
// §7.1): HKDF-Expand(secret, HkdfLabel, length) with HkdfLabel = length
// (2 bytes) ‖ "tls13 "+label (1-byte length prefix) ‖ context (1-byte
// length prefix).
func HKDFExpandLabel(h crypto.Hash, secret []byte, label string, context []byte, length int) ([]byte, error) {
	info, err := HKDFLabel(label, context, length)
	if err != nil {
		return nil, err
	}
	return hkdf.Expand(h.New, secret, string(info), length)
}

// HKDFLabel returns the HkdfLabel structure HKDFExpandLabel expands with
// (the info of HKDF-Expand): length (2 bytes) ‖ "tls13 "+label (1-byte
// length prefix) ‖ context (1-byte length prefix). Two parties computing
// HKDF-Expand-Label jointly (MPC mode) need it apart from the secret.
func HKDFLabel(label string, context []byte, length int) ([]byte, error) {
	full := "tls13 " + label
	if len(full) > 255 || len(context) > 255 || length < 0 || length > 0xffff {
		return nil, errors.New("mpctls: hkdf-expand-label argument out of range")
	}
	info := make([]byte, 0, 4+len(full)+len(context))
	info = append(info, byte(length>>8), byte(length), byte(len(full)))
	info = append(info, full...)
	info = append(info, byte(len(context)))
	info = append(info, context...)
	return info, nil
}

// DeriveSecret is Derive-Secret of RFC 8446 §7.1, taking the transcript
// hash already computed.
func DeriveSecret(h crypto.Hash, secret []byte, label string, transcriptHash []byte) ([]byte, error) {
	return HKDFExpandLabel(h, secret, label, transcriptHash, h.Size())
}

// TrafficKey returns the AEAD key and IV of a TLS 1.3 traffic secret for
// suite s (RFC 8446 §7.3).
func TrafficKey(s Suite, secret []byte) (key, iv []byte, err error) {
	if s.Version != VersionTLS13 {
		return nil, nil, fmt.Errorf("%w: %s is not a tls 1.3 suite", ErrUnsupported, s.Name)
	}
	if len(secret) != s.Hash.Size() {
		return nil, nil, fmt.Errorf("%w: traffic secret of %d bytes for %s", ErrDecrypt, len(secret), s.Name)
	}
	if key, err = HKDFExpandLabel(s.Hash, secret, "key", nil, s.KeyLen); err != nil {
		return nil, nil, err
	}
	if iv, err = HKDFExpandLabel(s.Hash, secret, "iv", nil, 12); err != nil {
		return nil, nil, err
	}
	return key, iv, nil
}

// NextTrafficSecret returns application_traffic_secret_N+1 from
// application_traffic_secret_N (RFC 8446 §7.2), the secret in force after
// a KeyUpdate.
func NextTrafficSecret(s Suite, secret []byte) ([]byte, error) {
	if len(secret) != s.Hash.Size() {
		return nil, fmt.Errorf("%w: traffic secret of %d bytes for %s", ErrDecrypt, len(secret), s.Name)
	}
	return HKDFExpandLabel(s.Hash, secret, "traffic upd", nil, s.Hash.Size())
}

// finishedMAC computes verify_data = HMAC(finished_key, transcriptHash)
// with finished_key = HKDF-Expand-Label(secret, "finished", "", Hash.len)
// (RFC 8446 §4.4.4).
func finishedMAC(h crypto.Hash, secret, transcriptHash []byte) ([]byte, error) {
	fk, err := HKDFExpandLabel(h, secret, "finished", nil, h.Size())
	if err != nil {
		return nil, err
	}
	m := hmac.New(h.New, fk)
	m.Write(transcriptHash)
	return m.Sum(nil), nil
}

// prf12 is the TLS 1.2 PRF (RFC 5246 §5): P_hash(secret, label ‖ seed).
func prf12(h crypto.Hash, secret []byte, label string, seed []byte, n int) []byte {
	labelSeed := append([]byte(label), seed...)
	mac := hmac.New(h.New, secret)
	out := make([]byte, 0, n+h.Size())
	a := hmacOnce(mac, labelSeed) // A(1)
	for len(out) < n {
		mac.Reset()
		mac.Write(a)
		mac.Write(labelSeed)
		out = mac.Sum(out)
		a = hmacOnce(mac, a)
	}
	return out[:n]
}

func hmacOnce(mac hash.Hash, data []byte) []byte {
	mac.Reset()
	mac.Write(data)
	return mac.Sum(nil)
}

// ServerWriteKey12 derives, for a TLS 1.2 AEAD suite, the server write key
// and IV from the master secret and the hello randoms (RFC 5246 §6.3: the
// key block is PRF(master_secret, "key expansion", server_random ‖
// client_random), split into client key, server key, client IV, server IV;
// AEAD suites have no MAC keys). Only the server half is returned: it is
// all a presentation ever discloses.
func ServerWriteKey12(s Suite, masterSecret, clientRandom, serverRandom []byte) (key, iv []byte, err error) {
	if s.Version != VersionTLS12 {
		return nil, nil, fmt.Errorf("%w: %s is not a tls 1.2 suite", ErrUnsupported, s.Name)
	}
	if len(masterSecret) != 48 || len(clientRandom) != 32 || len(serverRandom) != 32 {
		return nil, nil, errors.New("mpctls: tls 1.2 master secret must be 48 bytes and randoms 32")
	}
	seed := append(append([]byte(nil), serverRandom...), clientRandom...)
	kb := prf12(s.Hash, masterSecret, "key expansion", seed, 2*s.KeyLen+2*s.IVLen)
	key = kb[s.KeyLen : 2*s.KeyLen]
	iv = kb[2*s.KeyLen+s.IVLen:]
	return key, iv, nil
}
