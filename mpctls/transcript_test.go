package mpctls

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
)

// session makes n records alternating irregularly between directions.
func session(n int) []Record {
	var seq [3]uint64
	out := make([]Record, n)
	for i := range out {
		d := ClientToServer
		if i%3 != 0 {
			d = ServerToClient
		}
		typ := RecordApplicationData
		if seq[d] == 0 {
			typ = RecordHandshake
		}
		out[i] = rec(d, seq[d], typ, []byte(fmt.Sprintf("record %d", i)))
		seq[d]++
	}
	return out
}

// mth is the recursive RFC 6962 definition, the reference the streaming
// accumulator and the tree are checked against.
func mth(leaves [][32]byte) [32]byte {
	h := sha256.New()
	switch len(leaves) {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return leaves[0]
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	return nodeHash(h, mth(leaves[:k]), mth(leaves[k:]))
}

func TestTranscriptMatchesRFC6962(t *testing.T) {
	for n := 0; n <= 70; n++ {
		recs := session(n)
		var tr Transcript
		leaves := make([][32]byte, n)
		for i, r := range recs {
			if err := tr.Add(r); err != nil {
				t.Fatal(err)
			}
			leaves[i] = LeafHash(r)
		}
		want := mth(leaves)
		if tr.Root() != want {
			t.Fatalf("n=%d: streaming root differs from RFC 6962 root", n)
		}
		tree, err := NewTree(recs)
		if err != nil {
			t.Fatal(err)
		}
		if tree.Root() != want {
			t.Fatalf("n=%d: tree root differs", n)
		}
		for i, r := range recs {
			p, err := tree.Prove(uint64(i))
			if err != nil {
				t.Fatal(err)
			}
			if err := VerifyProof(want, r, p); err != nil {
				t.Fatalf("n=%d leaf %d: %v", n, i, err)
			}
			// The same proof must not verify another leaf, position or size.
			if n > 1 {
				other := recs[(i+1)%n]
				if VerifyProof(want, other, p) == nil {
					t.Fatalf("n=%d leaf %d: proof accepted another record", n, i)
				}
				q := *p
				q.Index = uint64((i + 1) % n)
				if VerifyProof(want, r, &q) == nil {
					t.Fatalf("n=%d leaf %d: proof accepted at another index", n, i)
				}
				q = *p
				q.Size = q.Index
				if err := VerifyProof(want, r, &q); !errors.Is(err, ErrProof) {
					t.Fatalf("n=%d leaf %d: index outside the tree accepted: %v", n, i, err)
				}
			}
		}
	}
}

func TestTranscriptCounts(t *testing.T) {
	var tr Transcript
	recs := session(10)
	var wantBytes [3]uint64
	for _, r := range recs {
		if err := tr.Add(r); err != nil {
			t.Fatal(err)
		}
		wantBytes[r.Dir] += uint64(len(r.Raw))
	}
	if tr.Records(ClientToServer) != 4 || tr.Records(ServerToClient) != 6 || tr.Size() != 10 {
		t.Fatalf("counts %d %d", tr.Records(ClientToServer), tr.Records(ServerToClient))
	}
	if tr.Bytes(ClientToServer) != wantBytes[ClientToServer] || tr.Bytes(ServerToClient) != wantBytes[ServerToClient] {
		t.Fatal("byte counts")
	}
}

func TestTranscriptSequence(t *testing.T) {
	recs := session(6)
	cases := map[string][]Record{
		"duplicate": {recs[0], recs[1], recs[1]},
		"dropped":   {recs[0], recs[2]},
		"reordered": {recs[0], recs[2], recs[1]},
		"bad start": {recs[3]},
	}
	for name, rs := range cases {
		t.Run(name, func(t *testing.T) {
			var tr Transcript
			var err error
			for _, r := range rs {
				if err = tr.Add(r); err != nil {
					break
				}
			}
			if !errors.Is(err, ErrSequence) {
				t.Fatalf("got %v, want ErrSequence", err)
			}
			if _, err := NewTree(rs); !errors.Is(err, ErrSequence) {
				t.Fatalf("NewTree: got %v, want ErrSequence", err)
			}
		})
	}
	var tr Transcript
	bad := recs[0]
	bad.Raw = append([]byte(nil), bad.Raw...)
	bad.Raw[4]++ // length field no longer matches
	if err := tr.Add(bad); !errors.Is(err, ErrMalformedRecord) {
		t.Fatalf("got %v", err)
	}
}

func TestProofLimits(t *testing.T) {
	recs := session(5)
	tree, _ := NewTree(recs)
	if _, err := tree.Prove(5); !errors.Is(err, ErrProof) {
		t.Fatal(err)
	}
	p, _ := tree.Prove(2)
	long := *p
	long.Path = append(append([][32]byte{}, p.Path...), [32]byte{})
	if err := VerifyProof(tree.Root(), recs[2], &long); !errors.Is(err, ErrProof) {
		t.Fatal(err)
	}
	short := *p
	short.Path = p.Path[:len(p.Path)-1]
	if err := VerifyProof(tree.Root(), recs[2], &short); !errors.Is(err, ErrProof) {
		t.Fatal(err)
	}
	if err := VerifyProof(tree.Root(), recs[2], nil); !errors.Is(err, ErrProof) {
		t.Fatal(err)
	}
}
