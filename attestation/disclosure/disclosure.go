// Package disclosure commits to an ACDS output entry by entry, so that a
// holder can later show some entries — "this Observation" — with proof that
// the enclave attested them, without showing the others (DESIGN §9).
//
// The commitment is a Merkle tree in the shape of RFC 6962 (Certificate
// Transparency) over the entries of the output Bundle, in order. Leaf i is
// SHA-256(0x00 ‖ salt_i ‖ entry_i), where entry_i is the entry object's
// canonical bytes as they appear in the output; interior nodes are
// SHA-256(0x01 ‖ left ‖ right). The enclave signs the root and the number
// of entries in the output's claims ([attestation.Commitment]).
//
// Salts keep hidden entries hidden: without salt_i, the leaf of entry i
// cannot be recomputed from a guess of its content, so the sibling hashes
// in a proof confirm nothing about the entries they stand for. Each salt is
// AES-256_key("acdsdsc1" ‖ uint64(2i)) ‖ AES-256_key("acdsdsc1" ‖ uint64(2i+1))
// — AES-256 used as a pseudorandom function on distinct blocks — under a
// per-output random key of [KeySize] bytes. (AES rather than HMAC-SHA-256:
// two block encryptions per leaf instead of two SHA-256 compressions, which
// keeps building the commitment close to hashing the output once.) The enclave returns that key
// to the requester with the output (acds.Result.DisclosureKey), never in
// the attestation bundle; a disclosure carries only the salts of the
// entries it shows, from which no other salt can be derived.
//
// The package lives under attestation because the commitment is part of
// what the enclave attests: the server builds commitments with [Commit]; a
// holder chooses entries with [Select], checks that an output, its key and
// its bundle belong together with [CheckKey] and builds a disclosure with
// [New]; and package verify checks it with [Check] after it has verified the
// bundle that carries the signed commitment.
package disclosure

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
)

// Sizes.
const (
	// KeySize is the size of a per-output disclosure key.
	KeySize = 32
	// SaltSize is the size of a leaf's salt.
	SaltSize = 32
	// MaxEntries bounds the entries of a committed output.
	MaxEntries = 1 << 24
)

// Error classes; every error of this package wraps one.
var (
	// ErrMalformed marks bytes that are not a disclosure, or an output that
	// is not a Bundle of entries.
	ErrMalformed = errors.New("disclosure: malformed")
	// ErrTooLarge marks input over its limit.
	ErrTooLarge = errors.New("disclosure: too large")
	// ErrNoEntries marks an output Bundle without entries, which has
	// nothing to commit to. It also matches ErrMalformed.
	ErrNoEntries = fmt.Errorf("%w: the output has no entries", ErrMalformed)
	// ErrKey marks a disclosure key of the wrong size.
	ErrKey = errors.New("disclosure: key must be 32 bytes")
	// ErrNotCommitted marks a disclosed entry whose content, salt, index
	// or proof does not lead to the committed root.
	ErrNotCommitted = errors.New("disclosure: entry is not under the committed root")
	// ErrOrder marks entries that are not disclosed in increasing index
	// order.
	ErrOrder = errors.New("disclosure: entries out of order")
	// ErrDuplicate marks an entry disclosed twice.
	ErrDuplicate = errors.New("disclosure: entry disclosed twice")
	// ErrOutOfRange marks an index at or beyond the committed entry count.
	ErrOutOfRange = errors.New("disclosure: entry index beyond the committed entries")
	// ErrCount marks a disclosure whose entry count differs from the
	// committed one.
	ErrCount = errors.New("disclosure: entry count differs from the commitment")
)

// EntryError says which disclosed entry failed and why. It wraps one of
// the error classes.
type EntryError struct {
	Position int    // position in the disclosure's entries
	Index    int    // the entry's index in the output
	Ref      string // "Type/id" of its resource, when it has one
	Reason   string
	Err      error
}

func (e *EntryError) Error() string {
	ref := ""
	if e.Ref != "" {
		ref = " (" + e.Ref + ")"
	}
	return fmt.Sprintf("disclosed entry %d, output entry %d%s: %s", e.Position, e.Index, ref, e.Reason)
}

// Unwrap returns the error class.
func (e *EntryError) Unwrap() error { return e.Err }

// Commitment is the signed commitment to an output's entries.
type Commitment struct {
	Root  [HashSize]byte // RFC 6962 tree head over the salted leaves
	Count int            // number of entries (leaves)
}

// Salt returns the salt of entry index under key, a [KeySize]-byte key
// (the zero salt for a key of another size, which no commitment uses:
// Commit refuses such keys with ErrKey).
func Salt(key []byte, index int) [SaltSize]byte {
	var out [SaltSize]byte
	if b, err := aes.NewCipher(key); err == nil && len(key) == KeySize {
		saltInto(b, index, out[:])
	}
	return out
}

// saltLabel separates the salt PRF's inputs from any other use of a key.
const saltLabel = "acdsdsc1"

// saltInto writes the salt of entry index under the keyed block cipher b
// to dst (SaltSize bytes): two AES blocks on distinct inputs.
func saltInto(b cipher.Block, index int, dst []byte) {
	var in [aes.BlockSize]byte
	copy(in[:], saltLabel)
	binary.BigEndian.PutUint64(in[len(saltLabel):], uint64(2*index))
	b.Encrypt(dst[:aes.BlockSize], in[:])
	binary.BigEndian.PutUint64(in[len(saltLabel):], uint64(2*index+1))
	b.Encrypt(dst[aes.BlockSize:SaltSize], in[:])
}

// Leaf returns the leaf hash of an entry's canonical bytes under salt.
// Without the salt it cannot be computed, which is what keeps an entry
// that is not disclosed from being confirmed by guessing its content.
func Leaf(salt [SaltSize]byte, entry []byte) [HashSize]byte {
	return leafHash(salt[:], entry)
}

func leaves(key []byte, entries [][]byte) ([][HashSize]byte, error) {
	if len(key) != KeySize {
		return nil, ErrKey
	}
	if len(entries) > MaxEntries {
		return nil, fmt.Errorf("%w: %d entries, at most %d", ErrTooLarge, len(entries), MaxEntries)
	}
	ls := make([][HashSize]byte, len(entries))
	s := newLeafer(key)
	for i, e := range entries {
		ls[i] = s.leaf(i, e)
	}
	return ls, nil
}

// leafer computes salts and leaves with state reused from one entry to
// the next. Its buffers live with it, on the heap once, rather than in
// each call, where passing them to the hash.Hash interface would allocate
// them per entry.
type leafer struct {
	b   cipher.Block       // AES-256 keyed for salts
	h   hash.Hash          // SHA-256 for leaves
	pre [1 + SaltSize]byte // 0x00 ‖ salt
	sum [HashSize]byte
}

func newLeafer(key []byte) *leafer {
	b, err := aes.NewCipher(key)
	if err != nil {
		panic("disclosure: " + err.Error()) // unreachable: callers check len(key) == KeySize
	}
	return &leafer{b: b, h: sha256.New()}
}

// leaf returns the leaf hash of entry index with content e.
func (s *leafer) leaf(index int, e []byte) [HashSize]byte {
	saltInto(s.b, index, s.pre[1:]) // the salt, in place after the 0x00
	s.h.Reset()
	s.h.Write(s.pre[:])
	s.h.Write(e)
	s.h.Sum(s.sum[:0])
	return s.sum
}

func saltBytes(key []byte, i int) []byte {
	s := Salt(key, i)
	return s[:]
}

// Commit returns the commitment to the entries of output (canonical JSON
// of a Bundle, see [Entries]) under key. An output without entries cannot
// be committed (ErrMalformed).
func Commit(key, output []byte) (Commitment, error) {
	entries, err := Entries(output)
	if err != nil {
		return Commitment{}, err
	}
	return CommitEntries(key, entries)
}

// CommitEntries is Commit for a producer that already holds the entries'
// canonical bytes, in order (for example from its encoder), and so need
// not scan the output for them.
func CommitEntries(key []byte, entries [][]byte) (Commitment, error) {
	if len(entries) == 0 {
		return Commitment{}, ErrNoEntries
	}
	ls, err := leaves(key, entries)
	if err != nil {
		return Commitment{}, err
	}
	return Commitment{Root: root(ls), Count: len(ls)}, nil
}
