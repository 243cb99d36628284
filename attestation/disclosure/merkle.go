package disclosure

import (
	"crypto/sha256"
	"hash"
	"math/bits"
)

// HashSize is the size of leaf, node and root hashes (SHA-256).
const HashSize = sha256.Size

// leafHash is SHA-256(0x00 ‖ salt ‖ entry): the RFC 6962 leaf hash of the
// salted entry.
func leafHash(salt, entry []byte) [HashSize]byte {
	return leafHashWith(sha256.New(), salt, entry)
}

// leafHashWith is leafHash with a SHA-256 state to reuse (reset here).
func leafHashWith(h hash.Hash, salt, entry []byte) [HashSize]byte {
	h.Reset()
	var prefix [1 + SaltSize]byte // one write for 0x00 ‖ salt
	n := copy(prefix[1:], salt)
	h.Write(prefix[:1+n])
	h.Write(entry)
	var out [HashSize]byte
	h.Sum(out[:0])
	return out
}

// nodeHash is SHA-256(0x01 ‖ left ‖ right), the RFC 6962 interior node.
func nodeHash(left, right [HashSize]byte) [HashSize]byte {
	var buf [1 + 2*HashSize]byte
	buf[0] = 0x01
	copy(buf[1:], left[:])
	copy(buf[1+HashSize:], right[:])
	return sha256.Sum256(buf[:])
}

// split returns the largest power of two smaller than n (n ≥ 2): RFC 6962's k.
func split(n int) int {
	return 1 << (bits.Len(uint(n-1)) - 1)
}

// root is RFC 6962's MTH over leaves (at least one).
func root(leaves [][HashSize]byte) [HashSize]byte {
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := split(len(leaves))
	return nodeHash(root(leaves[:k]), root(leaves[k:]))
}

// path is RFC 6962's PATH(m, D[n]): the audit path of leaf m, leaf side
// first.
func path(m int, leaves [][HashSize]byte) [][HashSize]byte {
	if len(leaves) <= 1 {
		return nil
	}
	k := split(len(leaves))
	if m < k {
		return append(path(m, leaves[:k]), root(leaves[k:]))
	}
	return append(path(m-k, leaves[k:]), root(leaves[:k]))
}

// rootFromPath recomputes the root from leaf hash h at index of a tree of
// size leaves with audit path p (RFC 9162 §2.1.3.2). ok is false when p
// has the wrong length for index and size.
func rootFromPath(index, size int, h [HashSize]byte, p [][HashSize]byte) (r [HashSize]byte, ok bool) {
	if index < 0 || index >= size {
		return r, false
	}
	fn, sn := uint64(index), uint64(size-1)
	r = h
	for _, sib := range p {
		if sn == 0 {
			return r, false
		}
		if fn&1 == 1 || fn == sn {
			r = nodeHash(sib, r)
			if fn&1 == 0 {
				for fn&1 == 0 && fn != 0 {
					fn >>= 1
					sn >>= 1
				}
			}
		} else {
			r = nodeHash(r, sib)
		}
		fn >>= 1
		sn >>= 1
	}
	return r, sn == 0
}
