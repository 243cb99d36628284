package mpctls

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
)

// Merkle tree construction
//
// The transcript of a session is a Merkle tree over every record of both
// directions, in the order the notary observed them (arrival order). It is
// the tree of RFC 6962 §2.1 (RFC 9162 §2.1.1) with these leaf and node
// hashes:
//
//	leaf(r)    = SHA-256(0x00 ‖ dir ‖ seq ‖ raw)
//	node(l, r) = SHA-256(0x01 ‖ l ‖ r)
//
// where dir is one byte (1 client→server, 2 server→client), seq is the
// record's index in its direction as 8 bytes big endian, and raw is the
// record's 5-byte header and fragment exactly as on the wire (for protected
// records, the ciphertext). For n > 1 leaves the root is
// node(MTH(first k leaves), MTH(remaining n-k leaves)) with k the largest
// power of two below n; the root of one leaf is its leaf hash, the root of
// no leaves is SHA-256 of the empty string.

// LeafHash returns the Merkle leaf hash of r.
func LeafHash(r Record) [32]byte {
	h := sha256.New()
	return leafHash(h, r)
}

// LeafHasher computes Merkle leaf hashes like LeafHash, reusing one
// SHA-256 state across records. The zero value is ready to use; a
// LeafHasher is not safe for concurrent use.
type LeafHasher struct{ h hash.Hash }

// Sum returns the Merkle leaf hash of r.
func (l *LeafHasher) Sum(r Record) [32]byte {
	if l.h == nil {
		l.h = sha256.New()
	}
	return leafHash(l.h, r)
}

func leafHash(h hash.Hash, r Record) [32]byte {
	var pre [10]byte
	pre[0] = 0x00
	pre[1] = byte(r.Dir)
	binary.BigEndian.PutUint64(pre[2:], r.Seq)
	h.Reset()
	h.Write(pre[:])
	h.Write(r.Raw)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

func nodeHash(h hash.Hash, l, r [32]byte) [32]byte {
	h.Reset()
	h.Write([]byte{0x01})
	h.Write(l[:])
	h.Write(r[:])
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// Transcript is a streaming Merkle accumulator over the records of one
// session. It keeps O(log n) hashes, never the records, plus one counter
// per change of direction (see Order), so a notary can feed it
// arbitrarily long sessions in bounded memory. The zero value is an
// empty transcript ready to use. A Transcript is not safe for concurrent
// use.
type Transcript struct {
	stack   []subtree // perfect subtrees, strictly decreasing sizes
	records [3]uint64 // indexed by Direction
	bytes   [3]uint64
	runs    Order // arrival order, see Order
	last    Direction
	h       hash.Hash
}

type subtree struct {
	hash [32]byte
	size uint64
}

// Add appends r to the transcript. It checks that r is a well-formed record
// and that r.Seq is exactly the number of records already added in r.Dir,
// so gaps, duplicates and reorderings within a direction are refused with
// ErrSequence.
func (t *Transcript) Add(r Record) error {
	if err := r.check(); err != nil {
		return err
	}
	if want := t.records[r.Dir]; r.Seq != want {
		return &RecordError{Dir: r.Dir, Seq: r.Seq, Reason: fmt.Sprintf("expected sequence number %d", want), Err: ErrSequence}
	}
	if t.h == nil {
		t.h = sha256.New()
	}
	cur := subtree{hash: leafHash(t.h, r), size: 1}
	for len(t.stack) > 0 && t.stack[len(t.stack)-1].size == cur.size {
		top := t.stack[len(t.stack)-1]
		t.stack = t.stack[:len(t.stack)-1]
		cur = subtree{hash: nodeHash(t.h, top.hash, cur.hash), size: top.size * 2}
	}
	t.stack = append(t.stack, cur)
	if r.Dir != t.last || len(t.runs) == 0 {
		if len(t.runs) == 0 && r.Dir == ServerToClient {
			t.runs = append(t.runs, 0)
		}
		t.runs = append(t.runs, 0)
		t.last = r.Dir
	}
	t.runs[len(t.runs)-1]++
	t.records[r.Dir]++
	t.bytes[r.Dir] += uint64(len(r.Raw))
	return nil
}

// Root returns the Merkle root over all records added so far.
func (t *Transcript) Root() [32]byte {
	if len(t.stack) == 0 {
		return sha256.Sum256(nil)
	}
	h := t.h
	root := t.stack[len(t.stack)-1].hash
	for i := len(t.stack) - 2; i >= 0; i-- {
		root = nodeHash(h, t.stack[i].hash, root)
	}
	return root
}

// Size returns the number of records (leaves) added so far.
func (t *Transcript) Size() uint64 { return t.records[ClientToServer] + t.records[ServerToClient] }

// Records returns the number of records added in direction d.
func (t *Transcript) Records(d Direction) uint64 {
	if !d.Valid() {
		return 0
	}
	return t.records[d]
}

// Bytes returns the number of wire bytes (headers included) added in
// direction d.
func (t *Transcript) Bytes(d Direction) uint64 {
	if !d.Valid() {
		return 0
	}
	return t.bytes[d]
}

// Proof is a Merkle inclusion proof (RFC 9162 §2.1.3) for the leaf at
// Index in a tree of Size leaves.
type Proof struct {
	Index uint64     `cbor:"1,keyasint"`
	Size  uint64     `cbor:"2,keyasint"`
	Path  [][32]byte `cbor:"3,keyasint"`
}

// Tree is the complete Merkle tree over a list of records, kept by the
// party that holds the records (the prover) to produce inclusion proofs.
// It stores every node hash (about 64 bytes per record), not the records.
type Tree struct {
	levels [][][32]byte // levels[0] are the leaf hashes
}

// NewTree builds the Merkle tree over records in arrival order. The
// records must form a valid transcript (per-direction sequence numbers in
// order, well-formed records); its root equals that of a Transcript fed
// the same records.
func NewTree(records []Record) (*Tree, error) {
	var counts [3]uint64
	h := sha256.New()
	leaves := make([][32]byte, len(records))
	for i, r := range records {
		if err := r.check(); err != nil {
			return nil, err
		}
		if r.Seq != counts[r.Dir] {
			return nil, &RecordError{Dir: r.Dir, Seq: r.Seq, Reason: fmt.Sprintf("expected sequence number %d", counts[r.Dir]), Err: ErrSequence}
		}
		counts[r.Dir]++
		leaves[i] = leafHash(h, r)
	}
	t := &Tree{levels: [][][32]byte{leaves}}
	for cur := leaves; len(cur) > 1; {
		next := make([][32]byte, (len(cur)+1)/2)
		for i := 0; i+1 < len(cur); i += 2 {
			next[i/2] = nodeHash(h, cur[i], cur[i+1])
		}
		if len(cur)%2 == 1 {
			// A lone right node is promoted unchanged: this is the
			// RFC 6962 split at the largest power of two.
			next[len(next)-1] = cur[len(cur)-1]
		}
		t.levels = append(t.levels, next)
		cur = next
	}
	return t, nil
}

// Size returns the number of leaves.
func (t *Tree) Size() uint64 { return uint64(len(t.levels[0])) }

// Root returns the Merkle root.
func (t *Tree) Root() [32]byte {
	top := t.levels[len(t.levels)-1]
	if len(top) == 0 {
		return sha256.Sum256(nil)
	}
	return top[0]
}

// Prove returns the inclusion proof of the leaf at index.
func (t *Tree) Prove(index uint64) (*Proof, error) {
	n := t.Size()
	if index >= n {
		return nil, fmt.Errorf("%w: leaf %d of %d", ErrProof, index, n)
	}
	p := &Proof{Index: index, Size: n}
	i := index
	for _, level := range t.levels[:len(t.levels)-1] {
		sib := i ^ 1
		if sib < uint64(len(level)) {
			p.Path = append(p.Path, level[sib])
		}
		i >>= 1
	}
	return p, nil
}

// ProveInclusion builds the tree over records and returns the inclusion
// proof of records[index]. Use NewTree when proving several records.
func ProveInclusion(records []Record, index int) (*Proof, error) {
	t, err := NewTree(records)
	if err != nil {
		return nil, err
	}
	if index < 0 {
		return nil, fmt.Errorf("%w: negative leaf index", ErrProof)
	}
	return t.Prove(uint64(index))
}

// maxProofPath bounds the length of a proof path: no tree of up to 2^64
// leaves needs more.
const maxProofPath = 64

// VerifyProof checks that r is the leaf at p.Index of the tree of p.Size
// leaves whose root is root. It checks the record's form but not its
// sequence number against the index (a leaf's seq is its position in its
// direction, not in the tree).
func VerifyProof(root [32]byte, r Record, p *Proof) error {
	if err := r.check(); err != nil {
		return err
	}
	if p == nil {
		return fmt.Errorf("%w: missing proof", ErrProof)
	}
	h := sha256.New()
	got, err := rootFromPath(h, leafHash(h, r), p)
	if err != nil {
		return err
	}
	if got != root {
		return fmt.Errorf("%w: %s record %d does not lead to the root", ErrProof, r.Dir, r.Seq)
	}
	return nil
}

// rootFromPath is the inclusion verification algorithm of RFC 9162
// §2.1.3.2: it recomputes the root from a leaf hash and its audit path.
func rootFromPath(h hash.Hash, leaf [32]byte, p *Proof) ([32]byte, error) {
	if p.Index >= p.Size {
		return [32]byte{}, fmt.Errorf("%w: index %d outside a tree of %d", ErrProof, p.Index, p.Size)
	}
	if len(p.Path) > maxProofPath {
		return [32]byte{}, fmt.Errorf("%w: path of %d hashes", ErrProof, len(p.Path))
	}
	fn, sn := p.Index, p.Size-1
	r := leaf
	for _, sib := range p.Path {
		if sn == 0 {
			return [32]byte{}, fmt.Errorf("%w: path longer than the tree is deep", ErrProof)
		}
		if fn&1 == 1 || fn == sn {
			r = nodeHash(h, sib, r)
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			r = nodeHash(h, r, sib)
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 {
		return [32]byte{}, fmt.Errorf("%w: path shorter than the tree is deep", ErrProof)
	}
	return r, nil
}
