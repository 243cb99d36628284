package ectf

import (
	"crypto/rand"
	"errors"
	"testing"

	"filippo.io/nistec"

	"github.com/acds-project/acds/mpctls/mpc/ot"
)

func randScalar(t testing.TB) []byte {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	b[0] &= 0x7f // below the group order
	return b[:]
}

func randBlock(t testing.TB) ot.Block {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return ot.BlockOf(b[:])
}

// setup makes the two points, their expected sum's x and OTS correlated
// OTs (the ideal functionality; package ot tests the real extension).
type fixture struct {
	xp, yp, xq, yq, want [32]byte
	cots                 []COT
	q                    []ot.Block
	index                []uint64
	delta                ot.Block
}

func setup(t testing.TB) fixture {
	var f fixture
	s, err := nistec.NewP256Point().ScalarBaseMult(randScalar(t))
	if err != nil {
		t.Fatal(err)
	}
	p1, _ := nistec.NewP256Point().ScalarMult(s, randScalar(t))
	p2, _ := nistec.NewP256Point().ScalarMult(s, randScalar(t))
	if f.xp, f.yp, err = Point(p1); err != nil {
		t.Fatal(err)
	}
	if f.xq, f.yq, err = Point(p2); err != nil {
		t.Fatal(err)
	}
	sum := nistec.NewP256Point().Add(p1, p2)
	if f.want, _, err = Point(sum); err != nil {
		t.Fatal(err)
	}
	f.delta = randBlock(t)
	for k := 0; k < OTs; k++ {
		q := randBlock(t)
		var c [1]byte
		rand.Read(c[:])
		choice := c[0]&1 == 1
		tt := q
		if choice {
			tt = q.Xor(f.delta)
		}
		f.q = append(f.q, q)
		f.index = append(f.index, uint64(1000+k))
		f.cots = append(f.cots, COT{Index: uint64(1000 + k), Choice: choice, T: tt})
	}
	return f
}

func run(t testing.TB, f fixture, tamper func(stage int, msg []byte)) (*Prover, [32]byte, [32]byte, error) {
	t.Helper()
	dom := []byte("session")
	p, flips, err := NewProver(rand.Reader, dom, f.xp, f.yp, f.cots)
	if err != nil {
		t.Fatal(err)
	}
	n, err := NewNotary(dom, f.xq, f.yq, f.delta, f.q, f.index)
	if err != nil {
		t.Fatal(err)
	}
	m1, err := n.First(flips)
	if err != nil {
		t.Fatal(err)
	}
	if tamper != nil {
		tamper(1, m1)
	}
	w, err := p.Second(m1)
	if err != nil {
		return p, [32]byte{}, [32]byte{}, err
	}
	m2, sN, err := n.Second(w)
	if err != nil {
		t.Fatal(err)
	}
	if tamper != nil {
		tamper(2, m2)
	}
	sP, err := p.Finish(m2)
	return p, sP, sN, err
}

func sumMod(a, b [32]byte) [32]byte {
	var out [32]byte
	copy(out[:], feBytes(add(mustNat(a[:]), mustNat(b[:]))))
	return out
}

func TestConversion(t *testing.T) {
	for i := 0; i < 4; i++ {
		f := setup(t)
		p, sP, sN, err := run(t, f, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := sumMod(sP, sN); got != f.want {
			t.Fatalf("s_P + s_N = %x, want x(P1+P2) = %x", got, f.want)
		}
		if err := p.VerifyNotary(f.delta, f.xq, f.yq, sN); err != nil {
			t.Fatalf("honest notary: %v", err)
		}
	}
}

// TestNotaryCheats: a notary that alters one correction, or opens other
// values or another share than it used, is caught when P replays its part.
func TestNotaryCheats(t *testing.T) {
	for _, stage := range []int{1, 2} {
		f := setup(t)
		p, sP, sN, err := run(t, f, func(s int, msg []byte) {
			if s == stage {
				msg[32*7+31] ^= 1 // correction of bit 7
				if msg[32*7] == 0xff {
					msg[32*7] = 0 // keep it reduced
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		_ = sP
		if err := p.VerifyNotary(f.delta, f.xq, f.yq, sN); !errors.Is(err, ErrCheat) {
			t.Fatalf("altered correction at stage %d: %v", stage, err)
		}
	}
	f := setup(t)
	p, _, sN, err := run(t, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	wrong := sN
	wrong[31] ^= 1
	if err := p.VerifyNotary(f.delta, f.xq, f.yq, wrong); !errors.Is(err, ErrCheat) {
		t.Fatalf("wrong share: %v", err)
	}
	other := setup(t)
	if err := p.VerifyNotary(f.delta, other.xq, other.yq, sN); !errors.Is(err, ErrCheat) {
		t.Fatalf("other point: %v", err)
	}
	if err := p.VerifyNotary(randBlock(t), f.xq, f.yq, sN); !errors.Is(err, ErrCheat) {
		t.Fatalf("other Δ: %v", err)
	}
}

func TestMalformed(t *testing.T) {
	f := setup(t)
	dom := []byte("d")
	if _, _, err := NewProver(rand.Reader, dom, f.xp, f.yp, f.cots[:5]); !errors.Is(err, ErrState) {
		t.Errorf("few OTs: %v", err)
	}
	var big [32]byte
	for i := range big {
		big[i] = 0xff
	}
	if _, _, err := NewProver(rand.Reader, dom, big, f.yp, f.cots); !errors.Is(err, ErrPoint) {
		t.Errorf("unreduced coordinate: %v", err)
	}
	p, flips, err := NewProver(rand.Reader, dom, f.xp, f.yp, f.cots)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Second(make([]byte, 10)); !errors.Is(err, ErrMessage) {
		t.Errorf("short first message: %v", err)
	}
	if _, err := p.Second(make([]byte, NotaryFirstSize)); !errors.Is(err, ErrState) {
		t.Errorf("Second twice: %v", err)
	}
	n, err := NewNotary(dom, f.xq, f.yq, f.delta, f.q, f.index)
	if err != nil {
		t.Fatal(err)
	}
	m1, err := n.First(flips)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.Second(big[:]); !errors.Is(err, ErrMessage) {
		t.Errorf("short second message: %v", err)
	}
	p2, _, _ := NewProver(rand.Reader, dom, f.xp, f.yp, f.cots)
	bad := append([]byte(nil), m1...)
	copy(bad[:32], big[:])
	if _, err := p2.Second(bad); !errors.Is(err, ErrMessage) {
		t.Errorf("unreduced correction: %v", err)
	}
	if _, err := p2.Finish(make([]byte, NotarySecondSize)); !errors.Is(err, ErrState) {
		t.Errorf("Finish out of order: %v", err)
	}
	if _, _, err := Point(nistec.NewP256Point()); !errors.Is(err, ErrPoint) {
		t.Errorf("infinity: %v", err)
	}
}
