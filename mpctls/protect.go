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
