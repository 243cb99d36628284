package ot

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"filippo.io/bigmod"
	"filippo.io/nistec"
)

// Errors of the OT protocols. Each error wraps one of them.
var (
	// ErrMessage reports a message that does not parse or does not fit the
	// protocol state: wrong length, a point off the curve or at infinity.
	ErrMessage = errors.New("ot: malformed message")
	// ErrConsistency reports a failed consistency check: the peer deviated
	// from the protocol.
	ErrConsistency = errors.New("ot: consistency check failed")
	// ErrState reports a call out of the protocol's order.
	ErrState = errors.New("ot: call out of order")
)

// Seed is a 128-bit seed, the output of a base OT.
type Seed [16]byte

// pointSize is the size of a compressed P-256 point.
const pointSize = 33

// MaxBaseOTs bounds the number of base OTs of one instance.
const MaxBaseOTs = 1024

const h2cDomain = "acds mpc mr19 hash to P-256 v1"

var orderP256 = func() *bigmod.Modulus {
	n, err := bigmod.NewModulus([]byte{
		0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xbc, 0xe6, 0xfa, 0xad, 0xa7, 0x17, 0x9e, 0x84, 0xf3, 0xb9, 0xca, 0xc2, 0xfc, 0x63, 0x25, 0x51,
	})
	if err != nil {
		panic(err)
	}
	return n
}()

// randomScalar returns a uniformly random non-zero scalar modulo the group
// order, by rejection (which leaks only how many tries it took).
func randomScalar(r io.Reader) ([]byte, error) {
	b := make([]byte, 32)
	for {
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		n, err := bigmod.NewNat().SetBytes(b, orderP256)
		if err == nil && n.IsZero() == 0 {
			return b, nil
		}
	}
}

// hashToPoint is the random oracle onto P-256 of Masny–Rindal, by
// try-and-increment (Boneh, Lynn, Shacham 2001): the first counter whose
// SHA-512 digest gives a valid x-coordinate (the first 32 bytes) picks
// the point with the y-parity of byte 32. Every point but the identity is
// equally likely. It only ever hashes public values, so the number of
// tries leaks nothing.
func hashToPoint(p *nistec.P256Point) (*nistec.P256Point, error) {
	in := p.BytesCompressed()
	var enc [33]byte
	for ctr := uint32(0); ctr < 1024; ctr++ {
		h := sha512.New()
		h.Write([]byte(h2cDomain))
		h.Write(in)
		h.Write(binary.BigEndian.AppendUint32(nil, ctr))
		d := h.Sum(nil)
		enc[0] = 2 | d[32]&1
		copy(enc[1:], d[:32])
		if q, err := nistec.NewP256Point().SetBytes(enc[:]); err == nil {
			return q, nil
		}
	}
	return nil, fmt.Errorf("%w: no point found", ErrMessage) // probability 2^-1024
}

func parsePoint(b []byte) (*nistec.P256Point, error) {
	p, err := nistec.NewP256Point().SetBytes(b)
	if err != nil || len(b) != pointSize || p.IsInfinity() == 1 {
		return nil, fmt.Errorf("%w: not a compressed P-256 point", ErrMessage)
	}
	return p, nil
}

// kdf derives the seed of base OT i from the transcript and the shared
// point.
func kdf(sid []byte, i int, a []byte, r0, r1 []byte, k *nistec.P256Point) Seed {
	h := sha256.New()
	h.Write([]byte("acds mpc base ot v1"))
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(sid)))
	h.Write(n[:])
	h.Write(sid)
	binary.BigEndian.PutUint64(n[:], uint64(i))
	h.Write(n[:])
	h.Write(a)
	h.Write(r0)
	h.Write(r1)
	h.Write(k.BytesCompressed())
	var s Seed
	copy(s[:], h.Sum(nil))
	return s
}

// BaseSender is the sender of a batch of random base OTs: Masny and
// Rindal's endemic OT from Diffie–Hellman over P-256 ("Endemic Oblivious
// Transfer", CCS 2019, §5). It ends with two seeds per OT; the receiver
// learns the one of its choice and nothing of the other (CDH in the random
// oracle model), and the sender learns nothing of the choices (the
// receiver's message is uniform whatever they are).
//
// The sender's message (its key agreement share aG) does not depend on the
// receiver's, so both flights can cross.
type BaseSender struct {
	sid  []byte
	n    int
	a    []byte
	aPub []byte
	done bool
}

// NewBaseSender starts n base OTs in the session sid and returns the
// sender and its message.
func NewBaseSender(r io.Reader, sid []byte, n int) (*BaseSender, []byte, error) {
	if n <= 0 || n > MaxBaseOTs {
		return nil, nil, fmt.Errorf("%w: %d base OTs", ErrState, n)
	}
	a, err := randomScalar(r)
	if err != nil {
		return nil, nil, err
	}
	A, err := nistec.NewP256Point().ScalarBaseMult(a)
	if err != nil {
		return nil, nil, err
	}
	s := &BaseSender{sid: append([]byte(nil), sid...), n: n, a: a, aPub: A.BytesCompressed()}
	return s, append([]byte(nil), s.aPub...), nil
}

// Finish takes the receiver's message and returns the n seed pairs.
func (s *BaseSender) Finish(msg []byte) ([][2]Seed, error) {
	if s.done {
		return nil, fmt.Errorf("%w: base OT sender finished twice", ErrState)
	}
	// One shot: a failed Finish ends the sender too.
	s.done = true
	defer wipe(s.a)
	if len(msg) != 2*pointSize*s.n {
		return nil, fmt.Errorf("%w: receiver message of %d bytes for %d OTs", ErrMessage, len(msg), s.n)
	}
	out := make([][2]Seed, s.n)
	for i := 0; i < s.n; i++ {
		raw0 := msg[2*pointSize*i : 2*pointSize*i+pointSize]
		raw1 := msg[2*pointSize*i+pointSize : 2*pointSize*(i+1)]
		r0, err := parsePoint(raw0)
		if err != nil {
			return nil, err
		}
		r1, err := parsePoint(raw1)
		if err != nil {
			return nil, err
		}
		for c, pair := range [2][2]*nistec.P256Point{{r0, r1}, {r1, r0}} {
			// pk_c = r_c + H(r_{1-c}); K_c = a·pk_c.
			h, err := hashToPoint(pair[1])
			if err != nil {
				return nil, err
			}
			pk := nistec.NewP256Point().Add(pair[0], h)
			if pk.IsInfinity() == 1 {
				return nil, fmt.Errorf("%w: degenerate key in base OT %d", ErrMessage, i)
			}
			k, err := nistec.NewP256Point().ScalarMult(pk, s.a)
			if err != nil {
				return nil, err
			}
			out[i][c] = kdf(s.sid, i, s.aPub, raw0, raw1, k)
		}
	}
	return out, nil
}

// BaseReceiver is the receiver of a batch of random base OTs (see
// BaseSender).
type BaseReceiver struct {
	sid     []byte
	choices []bool
	b       [][]byte
	msg     []byte
	done    bool
}

// NewBaseReceiver starts one base OT per choice bit in the session sid
// and returns the receiver and its message. The choices do not affect the
// message's distribution nor, beyond the number of OTs, its computation
// time.
func NewBaseReceiver(r io.Reader, sid []byte, choices []bool) (*BaseReceiver, []byte, error) {
	n := len(choices)
	if n <= 0 || n > MaxBaseOTs {
		return nil, nil, fmt.Errorf("%w: %d base OTs", ErrState, n)
	}
	rc := &BaseReceiver{sid: append([]byte(nil), sid...), choices: append([]bool(nil), choices...), b: make([][]byte, n)}
	msg := make([]byte, 0, 2*pointSize*n)
	for i := 0; i < n; i++ {
		b, err := randomScalar(r)
		if err != nil {
			return nil, nil, err
		}
		rc.b[i] = b
		B, err := nistec.NewP256Point().ScalarBaseMult(b)
		if err != nil {
			return nil, nil, err
		}
		// r_{1-c} is a uniform point, r_c = B - H(r_{1-c}).
		rs, err := randomScalar(r)
		if err != nil {
			return nil, nil, err
		}
		rnd, err := nistec.NewP256Point().ScalarBaseMult(rs)
		if err != nil {
			return nil, nil, err
		}
		wipe(rs)
		h, err := hashToPoint(rnd)
		if err != nil {
			return nil, nil, err
		}
		other := nistec.NewP256Point().Add(B, nistec.NewP256Point().Negate(h))
		c := 0
		if choices[i] {
			c = 1
		}
		// c = 0: (r0, r1) = (other, rnd); c = 1: (rnd, other).
		r0 := nistec.NewP256Point().Select(rnd, other, c)
		r1 := nistec.NewP256Point().Select(other, rnd, c)
		msg = append(msg, r0.BytesCompressed()...)
		msg = append(msg, r1.BytesCompressed()...)
	}
	rc.msg = msg
	return rc, append([]byte(nil), msg...), nil
}

// Finish takes the sender's message and returns the seed of each choice.
func (rc *BaseReceiver) Finish(msg []byte) ([]Seed, error) {
	if rc.done {
		return nil, fmt.Errorf("%w: base OT receiver finished twice", ErrState)
	}
	rc.done = true
	A, err := parsePoint(msg)
	if err != nil {
		for _, b := range rc.b {
			wipe(b)
		}
		return nil, err
	}
	out := make([]Seed, len(rc.choices))
	for i := range out {
		k, err := nistec.NewP256Point().ScalarMult(A, rc.b[i])
		if err != nil {
			return nil, err
		}
		wipe(rc.b[i])
		raw0 := rc.msg[2*pointSize*i : 2*pointSize*i+pointSize]
		raw1 := rc.msg[2*pointSize*i+pointSize : 2*pointSize*(i+1)]
		out[i] = kdf(rc.sid, i, msg, raw0, raw1, k)
	}
	return out, nil
}

func wipe(b []byte) {
	for i := range b {
		b[i] = 0
	}
}
