package circuit

import (
	"bytes"
	"crypto/aes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"math/big"
	mrand "math/rand/v2"
	"testing"
)

func build(t testing.TB, b *Builder) *Circuit {
	t.Helper()
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func randBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func sha256Circuit(t testing.TB) *Circuit {
	b := NewBuilder()
	st := b.Input(256)
	blk := b.Input(512)
	b.Output(SHA256Compress(b, st, blk))
	return build(t, b)
}

// TestSHA256Compress checks the compression circuit against crypto/sha256
// resumed from random midstates.
func TestSHA256Compress(t *testing.T) {
	c := sha256Circuit(t)
	for i := 0; i < 8; i++ {
		var state [32]byte
		copy(state[:], randBytes(t, 32))
		block := randBytes(t, 64)
		h, err := ResumeSHA256(state, 64*uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		h.Write(block)
		want, n, err := Midstate(h)
		if err != nil || n != 64*uint64(i+1) {
			t.Fatalf("midstate: %v, %d bytes", err, n)
		}
		got, err := c.Eval(state[:], block)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[0], want[:]) {
			t.Fatalf("compression %d: got %x, want %x", i, got[0], want)
		}
	}
	// From the IV, one padded block is the digest of a short message.
	msg := []byte("abc")
	block := make([]byte, 64)
	copy(block, msg)
	block[len(msg)] = 0x80
	block[63] = byte(8 * len(msg))
	got, err := c.Eval(SHA256IV[:], block)
	if err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256(msg); !bytes.Equal(got[0], want[:]) {
		t.Fatalf("SHA-256(abc): got %x, want %x", got[0], want)
	}
	t.Logf("SHA-256 compression: %d AND, %d XOR/INV (Bristol: 22,573 AND, 110,644 XOR)", c.ANDs(), c.XORs())
	if c.ANDs() > 22700 {
		t.Errorf("SHA-256 compression costs %d AND gates", c.ANDs())
	}
}

// TestSHA256ConstantIV checks that a constant midstate folds into the
// circuit and makes it cheaper, and still computes the right digest.
func TestSHA256ConstantIV(t *testing.T) {
	b := NewBuilder()
	blk := b.Input(512)
	b.Output(SHA256Compress(b, Const(SHA256IV[:], 256), blk))
	c := build(t, b)
	block := make([]byte, 64)
	block[0] = 0x80
	got, err := c.Eval(block)
	if err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256(nil); !bytes.Equal(got[0], want[:]) {
		t.Fatalf("SHA-256(\"\"): got %x, want %x", got[0], want)
	}
	if full := sha256Circuit(t); c.ANDs() >= full.ANDs() {
		t.Errorf("a constant IV did not fold: %d AND vs %d", c.ANDs(), full.ANDs())
	}
}

func TestMidstateErrors(t *testing.T) {
	h := sha256.New()
	h.Write([]byte("not a block"))
	if _, _, err := Midstate(h); !errors.Is(err, ErrCircuit) {
		t.Fatalf("partial block: %v", err)
	}
	if _, err := ResumeSHA256([32]byte{}, 3); !errors.Is(err, ErrCircuit) {
		t.Fatalf("resume mid-block: %v", err)
	}
}

// aesSbox computes the AES S-box by definition (inverse in GF(2⁸), then
// the affine map), independent of the circuit.
func aesSbox(x byte) byte {
	mul := func(a, b byte) byte {
		var p byte
		for b != 0 {
			if b&1 == 1 {
				p ^= a
			}
			hi := a & 0x80
			a <<= 1
			if hi != 0 {
				a ^= 0x1b
			}
			b >>= 1
		}
		return p
	}
	inv := byte(0)
	for y := 1; y < 256; y++ {
		if mul(x, byte(y)) == 1 {
			inv = byte(y)
		}
	}
	r := func(v byte, n uint) byte { return v<<n | v>>(8-n) }
	return inv ^ r(inv, 1) ^ r(inv, 2) ^ r(inv, 3) ^ r(inv, 4) ^ 0x63
}

func TestSbox(t *testing.T) {
	b := NewBuilder()
	var in aesByte
	copy(in[:], b.Input(8))
	out := b.sbox(in)
	b.Output(out[:])
	c := build(t, b)
	for x := 0; x < 256; x++ {
		got, err := c.Eval([]byte{byte(x)})
		if err != nil {
			t.Fatal(err)
		}
		if want := aesSbox(byte(x)); got[0][0] != want {
			t.Fatalf("S(%02x) = %02x, want %02x", x, got[0][0], want)
		}
	}
	t.Logf("S-box: %d AND", c.ANDs())
}

func TestAES128(t *testing.T) {
	b := NewBuilder()
	key := b.Input(128)
	blk := b.Input(128)
	b.Output(AES128(b, key, blk))
	c := build(t, b)

	b2 := NewBuilder()
	k2 := b2.Input(128)
	b2.Output(AES128KeySchedule(b2, k2))
	ks := build(t, b2)

	b3 := NewBuilder()
	rk := b3.Input(11 * 128)
	blk3 := b3.Input(128)
	b3.Output(AES128Expanded(b3, rk, blk3))
	ex := build(t, b3)

	for i := 0; i < 8; i++ {
		k, p := randBytes(t, 16), randBytes(t, 16)
		blockCipher, err := aes.NewCipher(k)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, 16)
		blockCipher.Encrypt(want, p)
		got, err := c.Eval(k, p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[0], want) {
			t.Fatalf("AES-128: got %x, want %x", got[0], want)
		}
		rks, err := ks.Eval(k)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(rks[0][:16], k) {
			t.Fatalf("round key 0 is not the key")
		}
		got, err = ex.Eval(rks[0], p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[0], want) {
			t.Fatalf("AES-128 with expanded key: got %x, want %x", got[0], want)
		}
	}
	t.Logf("AES-128: %d AND with key schedule (Bristol 6,400), %d without (Bristol 5,120), key schedule %d (Bristol 1,280)",
		c.ANDs(), ex.ANDs(), ks.ANDs())
	if c.ANDs() != 200*34 || ex.ANDs() != 160*34 || ks.ANDs() != 40*34 {
		t.Errorf("AES-128 AND counts %d / %d / %d", c.ANDs(), ex.ANDs(), ks.ANDs())
	}
}

var p256 = func() []byte {
	p, _ := new(big.Int).SetString("ffffffff00000001000000000000000000000000ffffffffffffffffffffffff", 16)
	return p.FillBytes(make([]byte, 32))
}()

func TestAddMod(t *testing.T) {
	b := NewBuilder()
	x, y := b.Input(256), b.Input(256)
	b.Output(b.AddMod(x, y, p256))
	c := build(t, b)
	p := new(big.Int).SetBytes(p256)
	one := big.NewInt(1)
	cases := [][2]*big.Int{
		{big.NewInt(0), big.NewInt(0)},
		{new(big.Int).Sub(p, one), one},                      // = p → 0
		{new(big.Int).Sub(p, one), new(big.Int).Sub(p, one)}, // 2p-2
		{new(big.Int).Sub(p, big.NewInt(2)), one},            // p-1
	}
	rng := mrand.New(mrand.NewPCG(1, 2))
	for i := 0; i < 16; i++ {
		var buf [32]byte
		for j := range buf {
			buf[j] = byte(rng.Uint32())
		}
		a := new(big.Int).Mod(new(big.Int).SetBytes(buf[:]), p)
		for j := range buf {
			buf[j] = byte(rng.Uint32())
		}
		cases = append(cases, [2]*big.Int{a, new(big.Int).Mod(new(big.Int).SetBytes(buf[:]), p)})
	}
	for _, tc := range cases {
		got, err := c.Eval(tc[0].FillBytes(make([]byte, 32)), tc[1].FillBytes(make([]byte, 32)))
		if err != nil {
			t.Fatal(err)
		}
		want := new(big.Int).Mod(new(big.Int).Add(tc[0], tc[1]), p)
		if new(big.Int).SetBytes(got[0]).Cmp(want) != 0 {
			t.Fatalf("%x + %x mod p = %x, want %x", tc[0], tc[1], got[0], want)
		}
	}
	t.Logf("256-bit addition mod p: %d AND", c.ANDs())
	if c.ANDs() > 3*256+4 {
		t.Errorf("AddMod costs %d AND gates", c.ANDs())
	}
}

func TestAddAndEqual(t *testing.T) {
	b := NewBuilder()
	x, y := b.Input(16), b.Input(16)
	b.Output(b.Add(x, y))
	b.Output([]Wire{b.Equal(x, y)})
	c := build(t, b)
	rng := mrand.New(mrand.NewPCG(3, 4))
	for i := 0; i < 200; i++ {
		u, v := uint16(rng.Uint32()), uint16(rng.Uint32())
		if i%4 == 0 {
			v = u
		}
		got, err := c.Eval([]byte{byte(u >> 8), byte(u)}, []byte{byte(v >> 8), byte(v)})
		if err != nil {
			t.Fatal(err)
		}
		if s := uint16(got[0][0])<<8 | uint16(got[0][1]); s != u+v {
			t.Fatalf("%d + %d = %d", u, v, s)
		}
		if eq := got[1][0] == 0x80; eq != (u == v) {
			t.Fatalf("Equal(%d, %d) = %v", u, v, eq)
		}
	}
	if c.ANDs() != 15+15 {
		t.Errorf("16-bit add and equality cost %d AND, want 30", c.ANDs())
	}
}

// TestFolding checks constant folding, the removal of dead gates and
// constant outputs.
func TestFolding(t *testing.T) {
	b := NewBuilder()
	x := b.Input(2)
	if b.AND(x[0], Zero) != Zero || b.AND(x[0], One) != x[0] || b.XOR(x[0], Zero) != x[0] ||
		b.XOR(x[0], x[0]) != Zero || b.AND(x[1], x[1]) != x[1] || b.NOT(One) != Zero {
		t.Fatal("constants did not fold")
	}
	b.AND(x[0], x[1]) // dead
	b.Output([]Wire{One, Zero, b.XOR(x[0], One)})
	c := build(t, b)
	if c.ANDs() != 0 {
		t.Errorf("dead AND gate kept: %d AND", c.ANDs())
	}
	for _, in := range []byte{0x00, 0x40, 0x80, 0xc0} {
		got, err := c.Eval([]byte{in})
		if err != nil {
			t.Fatal(err)
		}
		want := byte(0x80)
		if in&0x80 == 0 {
			want |= 0x20
		}
		if got[0][0] != want {
			t.Fatalf("in %02x: got %08b, want %08b", in, got[0][0], want)
		}
	}
	// A constant output needs an input bit to hang on.
	b = NewBuilder()
	b.Output([]Wire{One})
	if _, err := b.Build(); !errors.Is(err, ErrCircuit) {
		t.Fatalf("constant output without inputs: %v", err)
	}
}

func TestEvalErrors(t *testing.T) {
	c := sha256Circuit(t)
	if _, err := c.Eval(make([]byte, 32)); !errors.Is(err, ErrCircuit) {
		t.Errorf("missing group: %v", err)
	}
	if _, err := c.Eval(make([]byte, 31), make([]byte, 64)); !errors.Is(err, ErrCircuit) {
		t.Errorf("short group: %v", err)
	}
	if _, err := BitsOf([]byte{0x01}, 7); !errors.Is(err, ErrCircuit) {
		t.Errorf("padding bit set: %v", err)
	}
	if _, err := c.EvalWires(make([]bool, 3)); !errors.Is(err, ErrCircuit) {
		t.Errorf("wrong bit count: %v", err)
	}
}

func TestDigest(t *testing.T) {
	a, b := sha256Circuit(t), sha256Circuit(t)
	if a.Digest() != b.Digest() {
		t.Fatal("the same construction gave two digests")
	}
	bb := NewBuilder()
	x := bb.Input(256)
	y := bb.Input(512)
	out := SHA256Compress(bb, x, y)
	out[0] = bb.NOT(out[0])
	bb.Output(out)
	if build(t, bb).Digest() == a.Digest() {
		t.Fatal("different circuits share a digest")
	}
}

func TestBitsRoundTrip(t *testing.T) {
	for n := 0; n < 20; n++ {
		bits := make([]bool, n)
		for i := range bits {
			bits[i] = i%3 == 0
		}
		got, err := BitsOf(BytesOf(bits), n)
		if err != nil {
			t.Fatal(err)
		}
		for i := range bits {
			if got[i] != bits[i] {
				t.Fatalf("n=%d bit %d", n, i)
			}
		}
	}
}
