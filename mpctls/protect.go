package mpctls

import (
	"crypto/cipher"
	"encoding/binary"
	"fmt"
)

// Opener removes the record protection of one direction and key epoch: it
// checks the AEAD tag of a protected record and returns its plaintext and
// true content type. It is stateless across records: the caller supplies
// each record's sequence number within the epoch, so records can be
// checked in any order or selectively.
type Opener struct {
	suite Suite
	aead  cipher.AEAD
	iv    []byte
}

// NewOpener13 returns the opener for TLS 1.3 records protected under
// trafficSecret (a handshake or application traffic secret) with suite s.
func NewOpener13(s Suite, trafficSecret []byte) (*Opener, error) {
	key, iv, err := TrafficKey(s, trafficSecret)
	if err != nil {
		return nil, err
	}
	a, err := s.aead(key)
	if err != nil {
		return nil, err
	}
	return &Opener{suite: s, aead: a, iv: iv}, nil
}

// NewOpener12 returns the opener for TLS 1.2 records protected with the
// write key and IV of suite s (see ServerWriteKey12).
func NewOpener12(s Suite, key, iv []byte) (*Opener, error) {
	if s.Version != VersionTLS12 {
		return nil, fmt.Errorf("%w: %s is not a tls 1.2 suite", ErrUnsupported, s.Name)
	}
	if len(iv) != s.IVLen {
		return nil, fmt.Errorf("%w: %s iv of %d bytes", ErrDecrypt, s.Name, len(iv))
	}
	a, err := s.aead(key)
	if err != nil {
		return nil, err
	}
	return &Opener{suite: s, aead: a, iv: append([]byte(nil), iv...)}, nil
}

// Overhead returns the largest number of bytes protection adds to a
// record fragment.
func (o *Opener) Overhead() int {
	n := o.aead.Overhead()
	if o.suite.Version == VersionTLS13 {
		n++ // inner content type
	} else if !o.suite.chacha {
		n += 8 // explicit nonce
	}
	return n
}

func decErr(r Record, reason string) error {
	return &RecordError{Dir: r.Dir, Seq: r.Seq, Reason: reason, Err: ErrDecrypt}
}

// Open authenticates and decrypts r, the record with sequence number seq
// in its key epoch (TLS 1.3 resets it to 0 at every key change; TLS 1.2
// counts from the first record after ChangeCipherSpec). It appends the
// plaintext to dst and returns the true content type. Padding (TLS 1.3) is
// removed. Any failure wraps ErrDecrypt.
func (o *Opener) Open(dst []byte, seq uint64, r Record) (contentType uint8, out []byte, err error) {
	if err := r.check(); err != nil {
		return 0, nil, err
	}
	frag := r.Raw[HeaderLen:]
	var nonce [12]byte
	if o.suite.Version == VersionTLS13 {
		if r.Type != RecordApplicationData {
			return 0, nil, decErr(r, fmt.Sprintf("protected tls 1.3 record has outer type %d", r.Type))
		}
		if len(frag) < o.aead.Overhead()+1 {
			return 0, nil, decErr(r, "record shorter than its tag")
		}
		copy(nonce[:], o.iv)
		xorSeq(&nonce, seq)
		start := len(dst)
		out, err := o.aead.Open(dst, nonce[:], frag, r.Raw[:HeaderLen])
		if err != nil {
			return 0, nil, decErr(r, "aead tag does not verify")
		}
		pt := out[start:]
		i := len(pt) - 1
		for i >= 0 && pt[i] == 0 {
			i--
		}
		if i < 0 {
			return 0, nil, decErr(r, "no inner content type")
		}
		ct := pt[i]
		if ct != RecordHandshake && ct != RecordAlert && ct != RecordApplicationData {
			return 0, nil, decErr(r, fmt.Sprintf("inner content type %d", ct))
		}
		if i > 1<<14 {
			return 0, nil, decErr(r, "plaintext too long")
		}
		return ct, out[:start+i], nil
	}
	// TLS 1.2: RFC 5288 (AES-GCM, explicit nonce) and RFC 7905 (ChaCha20).
	var aad [13]byte
	binary.BigEndian.PutUint64(aad[:8], seq)
	aad[8] = r.Type
	binary.BigEndian.PutUint16(aad[9:11], r.Version)
	if o.suite.chacha {
		copy(nonce[:], o.iv)
		xorSeq(&nonce, seq)
	} else {
		if len(frag) < 8 {
			return 0, nil, decErr(r, "record shorter than its explicit nonce")
		}
		copy(nonce[:4], o.iv)
		copy(nonce[4:], frag[:8])
		frag = frag[8:]
	}
	if len(frag) < o.aead.Overhead() {
		return 0, nil, decErr(r, "record shorter than its tag")
	}
	binary.BigEndian.PutUint16(aad[11:], uint16(len(frag)-o.aead.Overhead()))
	out, err = o.aead.Open(dst, nonce[:], frag, aad[:])
	if err != nil {
		return 0, nil, decErr(r, "aead tag does not verify")
	}
	return r.Type, out, nil
}

func xorSeq(nonce *[12]byte, seq uint64) {
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], seq)
	for i := range s {
		nonce[4+i] ^= s[i]
	}
}

// Sealer applies the record protection of one direction and key epoch:
// the inverse of Opener, for a client that holds its own write keys. Like
// Opener it is stateless across records: the caller supplies each
// record's sequence number within the epoch.
type Sealer struct {
	suite Suite
	aead  cipher.AEAD
	iv    []byte
}

// NewSealer13 returns the sealer for TLS 1.3 records protected under
// trafficSecret with suite s.
func NewSealer13(s Suite, trafficSecret []byte) (*Sealer, error) {
	o, err := NewOpener13(s, trafficSecret)
	if err != nil {
		return nil, err
	}
	return &Sealer{suite: o.suite, aead: o.aead, iv: o.iv}, nil
}

// NewSealer12 returns the sealer for TLS 1.2 records protected with the
// write key and IV of suite s.
func NewSealer12(s Suite, key, iv []byte) (*Sealer, error) {
	o, err := NewOpener12(s, key, iv)
	if err != nil {
		return nil, err
	}
	return &Sealer{suite: o.suite, aead: o.aead, iv: o.iv}, nil
}

// MaxPlaintext is the largest plaintext one record carries (RFC 8446
// §5.1, RFC 5246 §6.2.1).
const MaxPlaintext = 1 << 14

// Seal protects plaintext of content type contentType as the record with
// sequence number seq in its epoch and appends the whole record, header
// included, to dst. TLS 1.3 records carry the true type inside (outer
// type application_data, no padding); TLS 1.2 AES-GCM records use the
// sequence number as their explicit nonce. plaintext must not exceed
// MaxPlaintext.
func (s *Sealer) Seal(dst []byte, seq uint64, contentType uint8, plaintext []byte) ([]byte, error) {
	if len(plaintext) > MaxPlaintext {
		return nil, fmt.Errorf("mpctls: plaintext of %d bytes in one record", len(plaintext))
	}
	var nonce [12]byte
	start := len(dst)
	if s.suite.Version == VersionTLS13 {
		n := len(plaintext) + 1 + s.aead.Overhead()
		dst = append(dst, RecordApplicationData, 3, 3, byte(n>>8), byte(n))
		copy(nonce[:], s.iv)
		xorSeq(&nonce, seq)
		inner := make([]byte, 0, len(plaintext)+1)
		inner = append(append(inner, plaintext...), contentType)
		return s.aead.Seal(dst, nonce[:], inner, dst[start:start+HeaderLen]), nil
	}
	var aad [13]byte
	binary.BigEndian.PutUint64(aad[:8], seq)
	aad[8], aad[9], aad[10] = contentType, 3, 3
	binary.BigEndian.PutUint16(aad[11:], uint16(len(plaintext)))
	n := len(plaintext) + s.aead.Overhead()
	if s.suite.chacha {
		copy(nonce[:], s.iv)
		xorSeq(&nonce, seq)
	} else {
		n += 8
		copy(nonce[:4], s.iv)
		binary.BigEndian.PutUint64(nonce[4:], seq)
	}
	dst = append(dst, contentType, 3, 3, byte(n>>8), byte(n))
	if !s.suite.chacha {
		dst = append(dst, nonce[4:]...)
	}
	return s.aead.Seal(dst, nonce[:], plaintext, aad[:]), nil
}

// NewOpener13Keys returns the opener for TLS 1.3 records protected with
// the given write key and IV of suite s, for a holder of the keys but not
// of the traffic secret they come from.
func NewOpener13Keys(s Suite, key, iv []byte) (*Opener, error) {
	if s.Version != VersionTLS13 {
		return nil, fmt.Errorf("%w: %s is not a tls 1.3 suite", ErrUnsupported, s.Name)
	}
	if len(iv) != 12 {
		return nil, fmt.Errorf("%w: %s iv of %d bytes", ErrDecrypt, s.Name, len(iv))
	}
	a, err := s.aead(key)
	if err != nil {
		return nil, err
	}
	return &Opener{suite: s, aead: a, iv: append([]byte(nil), iv...)}, nil
}

// NewSealer13Keys returns the sealer for TLS 1.3 records protected with
// the given write key and IV of suite s.
func NewSealer13Keys(s Suite, key, iv []byte) (*Sealer, error) {
	o, err := NewOpener13Keys(s, key, iv)
	if err != nil {
		return nil, err
	}
	return &Sealer{suite: o.suite, aead: o.aead, iv: o.iv}, nil
}
