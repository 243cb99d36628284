package mpc

import (
	"encoding/binary"
	"fmt"

	"github.com/acds-project/acds/mpctls/mpc/garble"
)

// The parsers of the engine's messages. Every one checks the exact size
// the protocol state implies (the caller passes the expected counts), so
// no message can make the engine allocate or read beyond what the
// protocol already committed to.

// putBits packs bits, bit i at bit i%8 of byte i/8.
func putBits(bits []bool) []byte {
	out := make([]byte, (len(bits)+7)/8)
	for i, b := range bits {
		if b {
			out[i/8] |= 1 << (i % 8)
		}
	}
	return out
}

// parseBits unpacks n bits packed by putBits; the unused bits of the last
// byte must be zero.
func parseBits(b []byte, n int) ([]bool, error) {
	if len(b) != (n+7)/8 {
		return nil, fmt.Errorf("%w: %d bytes for %d bits", ErrProtocol, len(b), n)
	}
	if n%8 != 0 && b[len(b)-1]>>(n%8) != 0 {
		return nil, fmt.Errorf("%w: padding bits set", ErrProtocol)
	}
	out := make([]bool, n)
	for i := range out {
		out[i] = b[i/8]>>(i%8)&1 == 1
	}
	return out, nil
}

func putLabels(dst []byte, ls []garble.Label) []byte {
	for _, l := range ls {
		b := l.Bytes()
		dst = append(dst, b[:]...)
	}
	return dst
}

// parseLabels reads exactly n labels.
func parseLabels(b []byte, n int) ([]garble.Label, error) {
	if len(b) != 16*n {
		return nil, fmt.Errorf("%w: %d bytes for %d labels", ErrProtocol, len(b), n)
	}
	out := make([]garble.Label, n)
	for i := range out {
		out[i] = garble.LabelOf(b[16*i:])
	}
	return out, nil
}

// inputLabels is P's message for one of its inputs: n active GA labels,
// then n GB choice flips.
func parseInputLabels(b []byte, n int) ([]garble.Label, []bool, error) {
	if len(b) != 16*n+(n+7)/8 {
		return nil, nil, fmt.Errorf("%w: input message of %d bytes for %d bits", ErrProtocol, len(b), n)
	}
	ls, err := parseLabels(b[:16*n], n)
	if err != nil {
		return nil, nil, err
	}
	flips, err := parseBits(b[16*n:], n)
	return ls, flips, err
}

// callMsg names a call: its index, first AND gate and circuit digest.
const callMsgSize = 4 + 8 + 32

func putCall(idx int, base uint64, digest [32]byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(idx))
	b = binary.BigEndian.AppendUint64(b, base)
	return append(b, digest[:]...)
}

func parseCall(b []byte) (idx int, base uint64, digest [32]byte, err error) {
	if len(b) != callMsgSize {
		return 0, 0, digest, fmt.Errorf("%w: call message of %d bytes", ErrProtocol, len(b))
	}
	copy(digest[:], b[12:])
	return int(binary.BigEndian.Uint32(b)), binary.BigEndian.Uint64(b[4:]), digest, nil
}

// decoded is N's answer to a decoding: the n bits, then a 32-byte hash of
// the active labels they came from.
func parseDecoded(b []byte, n int) ([]bool, [32]byte, error) {
	var h [32]byte
	k := (n + 7) / 8
	if len(b) != k+32 {
		return nil, h, fmt.Errorf("%w: decoding of %d bytes for %d bits", ErrProtocol, len(b), n)
	}
	bits, err := parseBits(b[:k], n)
	copy(h[:], b[k:])
	return bits, h, err
}

// finalReveal is N's opening of its inputs: for each of its nIn input
// bits the value, the hash of its active GA labels, its active GB labels,
// and, when the session ran ECDH, its scalar.
type finalReveal struct {
	values  []bool
	gaHash  [32]byte
	gbLabel []garble.Label
	scalar  []byte // 32 bytes or none
}

func putFinalReveal(r finalReveal) []byte {
	b := putBits(r.values)
	b = append(b, r.gaHash[:]...)
	b = putLabels(b, r.gbLabel)
	b = append(b, byte(len(r.scalar)))
	return append(b, r.scalar...)
}

func parseFinalReveal(b []byte, nIn int, withScalar bool) (finalReveal, error) {
	var r finalReveal
	k := (nIn + 7) / 8
	sc := 0
	if withScalar {
		sc = 32
	}
	if len(b) != k+32+16*nIn+1+sc || int(b[len(b)-1-sc]) != sc {
		return r, fmt.Errorf("%w: final reveal of %d bytes for %d input bits", ErrProtocol, len(b), nIn)
	}
	var err error
	if r.values, err = parseBits(b[:k], nIn); err != nil {
		return r, err
	}
	copy(r.gaHash[:], b[k:k+32])
	if r.gbLabel, err = parseLabels(b[k+32:k+32+16*nIn], nIn); err != nil {
		return r, err
	}
	if withScalar {
		r.scalar = append([]byte(nil), b[len(b)-32:]...)
	}
	return r, nil
}

// finalOpen is N's opening of its proof garbling and of OT instance B:
// Δ_B, the seed of its input labels, and the κ base-OT seeds it received
// (which only the holder of Δ_B can know, binding Δ_B to the OTs).
const finalOpenSize = 16 + 16 + 16*128

// finalProof is P's opening of its commitment: the nonce and the hash of
// the proof's output labels.
const finalProofSize = 32 + 32
