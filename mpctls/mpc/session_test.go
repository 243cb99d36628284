package mpc

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/acds-project/acds/mpctls/mpc/circuit"
	"github.com/acds-project/acds/mpctls/mpc/garble"
	"github.com/acds-project/acds/mpctls/mpc/ot"
)

// party is one side's program in a test.
type party func(ctx context.Context, s *Session) error

// run runs the prover's and the notary's programs on the two ends of a
// connection, each followed by Finalize unless it returned an error, and
// returns their errors.
func run(t *testing.T, cfg Config, cp, cn *cheats, fp, fn party) (errP, errN error) {
	t.Helper()
	a, b := net.Pipe()
	return runOn(t, a, b, cfg, cp, cn, fp, fn)
}

func runOn(t *testing.T, a, b net.Conn, cfg Config, cp, cn *cheats, fp, fn party) (errP, errN error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 20 * time.Second
	}
	if cfg.OTBatch == 0 {
		cfg.OTBatch = 2048
	}
	side := func(conn net.Conn, role Role, ch *cheats, f party) error {
		s, err := newSession(ctx, conn, role, cfg, ch)
		if err != nil {
			conn.Close()
			return err
		}
		defer s.Close()
		if err := f(ctx, s); err != nil {
			return err
		}
		return s.Finalize(ctx)
	}
	done := make(chan error, 1)
	go func() { done <- side(b, Notary, cn, fn) }()
	errP = side(a, Prover, cp, fp)
	errN = <-done
	return errP, errN
}

// must fails the test unless both parties succeeded: must(t)(run(…)).
func must(t *testing.T) func(errP, errN error) {
	return func(errP, errN error) {
		t.Helper()
		if errP != nil || errN != nil {
			t.Fatalf("prover: %v; notary: %v", errP, errN)
		}
	}
}

func randBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func compressCircuit(t testing.TB) *circuit.Circuit {
	b := circuit.NewBuilder()
	st, blk := b.Input(256), b.Input(512)
	b.Output(circuit.SHA256Compress(b, st, blk))
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func compressRef(t testing.TB, state, block []byte) []byte {
	var st [32]byte
	copy(st[:], state)
	h, err := circuit.ResumeSHA256(st, 64)
	if err != nil {
		t.Fatal(err)
	}
	h.Write(block)
	out, _, err := circuit.Midstate(h)
	if err != nil {
		t.Fatal(err)
	}
	return out[:]
}

// TestCompression2PC: P's private state, N's private block, one SHA-256
// compression, opened to both, then finalized.
func TestCompression2PC(t *testing.T) {
	c := compressCircuit(t)
	state, block := randBytes(t, 32), randBytes(t, 64)
	want := compressRef(t, state, block)
	var gotP, gotN []byte
	prog := func(mine Role, my []byte, out *[]byte) party {
		return func(ctx context.Context, s *Session) error {
			var sv, bv []byte
			if mine == Prover {
				sv = my
			} else {
				bv = my
			}
			x, err := s.InputValue(ctx, Prover, 256, sv)
			if err != nil {
				return err
			}
			y, err := s.InputValue(ctx, Notary, 512, bv)
			if err != nil {
				return err
			}
			res, err := s.Call(ctx, c, x, y)
			if err != nil {
				return err
			}
			*out, err = s.Open(ctx, res[0], ToBoth)
			return err
		}
	}
	must(t)(run(t, Config{}, nil, nil, prog(Prover, state, &gotP), prog(Notary, block, &gotN)))
	if !bytes.Equal(gotP, want) || !bytes.Equal(gotN, want) {
		t.Fatalf("prover %x, notary %x, want %x", gotP, gotN, want)
	}
}

// TestAudiences checks every output kind: to the prover only, to the
// notary only, to both, shared, and a shared value opened later.
func TestAudiences(t *testing.T) {
	b := circuit.NewBuilder()
	x, y := b.Input(64), b.Input(64)
	b.Output(b.Add(x, y))
	b.Output(b.XORs(x, y))
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	xv, yv := randBytes(t, 8), randBytes(t, 8)
	want, _ := c.Eval(xv, yv)
	type result struct{ toP, toN, both, share, later []byte }
	var rp, rn result
	prog := func(r *result, role Role) party {
		return func(ctx context.Context, s *Session) error {
			var mx, my []byte
			if role == Prover {
				mx = xv
			} else {
				my = yv
			}
			in1, err := s.Input(Prover, 64)
			if err != nil {
				return err
			}
			in2, err := s.Input(Notary, 64)
			if err != nil {
				return err
			}
			// The call precedes the assignments: the prover garbles first.
			out, err := s.Call(ctx, c, in1, in2)
			if err != nil {
				return err
			}
			if err := s.Assign(ctx, in1, mx); err != nil {
				return err
			}
			if err := s.Assign(ctx, in2, my); err != nil {
				return err
			}
			if r.toP, err = s.Open(ctx, out[0], ToProver); err != nil {
				return err
			}
			if r.toN, err = s.Open(ctx, out[0], ToNotary); err != nil {
				return err
			}
			if r.both, err = s.Open(ctx, out[1].Slice(0, 32), ToBoth); err != nil {
				return err
			}
			if r.share, err = s.Share(ctx, out[1]); err != nil {
				return err
			}
			r.later, err = s.Open(ctx, out[1], ToProver)
			return err
		}
	}
	must(t)(run(t, Config{}, nil, nil, prog(&rp, Prover), prog(&rn, Notary)))
	switch {
	case !bytes.Equal(rp.toP, want[0]) || rn.toP != nil:
		t.Errorf("ToProver: prover %x notary %x, want %x", rp.toP, rn.toP, want[0])
	case !bytes.Equal(rn.toN, want[0]) || rp.toN != nil:
		t.Errorf("ToNotary: notary %x prover %x", rn.toN, rp.toN)
	case !bytes.Equal(rp.both, want[1][:4]) || !bytes.Equal(rn.both, want[1][:4]):
		t.Errorf("ToBoth: %x / %x, want %x", rp.both, rn.both, want[1][:4])
	case !bytes.Equal(xorBytes(rp.share, rn.share), want[1]):
		t.Errorf("shares %x ⊕ %x ≠ %x", rp.share, rn.share, want[1])
	case bytes.Equal(rp.share, want[1]) || bytes.Equal(rn.share, want[1]):
		t.Errorf("a share is the value")
	case !bytes.Equal(rp.later, want[1]) || rn.later != nil:
		t.Errorf("opened later: %x", rp.later)
	}
}

// TestReducedHMAC computes HMAC-SHA256 under a key shared between the
// parties the way MPC-mode TLS does: both pad midstates in 2PC, the inner
// one opened to the prover, who hashes the message locally; the outer one
// stays in the session for the final compression.
func TestReducedHMAC(t *testing.T) {
	key := randBytes(t, 32)
	kp := randBytes(t, 32)
	kn := xorBytes(key, kp)
	msg := []byte("tls13 c hs traffic" + string(randBytes(t, 32)))
	mac := hmac.New(sha256.New, key)
	mac.Write(msg)
	want := mac.Sum(nil)

	// pads(kP, kN) = (Comp(IV, k⊕ipad), Comp(IV, k⊕opad)) with k = kP⊕kN
	// zero-padded to a block.
	b := circuit.NewBuilder()
	p, n := b.Input(256), b.Input(256)
	k := append(b.XORs(p, n), circuit.Const(make([]byte, 32), 256)...)
	iv := circuit.Const(circuit.SHA256IV[:], 256)
	ipad := circuit.Const(bytes.Repeat([]byte{0x36}, 64), 512)
	opad := circuit.Const(bytes.Repeat([]byte{0x5c}, 64), 512)
	b.Output(circuit.SHA256Compress(b, iv, b.XORs(k, ipad)))
	b.Output(circuit.SHA256Compress(b, iv, b.XORs(k, opad)))
	pads, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	// outer(state, inner hash) = Comp(state, inner ‖ padding for 64+32 bytes)
	b = circuit.NewBuilder()
	st, inner := b.Input(256), b.Input(256)
	padding := make([]byte, 32)
	padding[0] = 0x80
	padding[30], padding[31] = 0x03, 0x00 // (64+32)*8 = 768 bits
	b.Output(circuit.SHA256Compress(b, st, append(inner, circuit.Const(padding, 256)...)))
	outer, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	var macP, macN []byte
	prog := func(role Role, out *[]byte) party {
		return func(ctx context.Context, s *Session) error {
			var mp, mn []byte
			if role == Prover {
				mp = kp
			} else {
				mn = kn
			}
			vp, err := s.InputValue(ctx, Prover, 256, mp)
			if err != nil {
				return err
			}
			vn, err := s.InputValue(ctx, Notary, 256, mn)
			if err != nil {
				return err
			}
			ms, err := s.Call(ctx, pads, vp, vn)
			if err != nil {
				return err
			}
			innerState, err := s.Open(ctx, ms[0], ToProver)
			if err != nil {
				return err
			}
			var ih []byte
			if role == Prover {
				var st [32]byte
				copy(st[:], innerState)
				h, err := circuit.ResumeSHA256(st, 64)
				if err != nil {
					return err
				}
				h.Write(msg)
				ih = h.Sum(nil)
			}
			vi, err := s.InputValue(ctx, Prover, 256, ih)
			if err != nil {
				return err
			}
			res, err := s.Call(ctx, outer, ms[1], vi)
			if err != nil {
				return err
			}
			*out, err = s.Open(ctx, res[0], ToBoth)
			return err
		}
	}
	must(t)(run(t, Config{}, nil, nil, prog(Prover, &macP), prog(Notary, &macN)))
	if !bytes.Equal(macP, want) || !bytes.Equal(macN, want) {
		t.Fatalf("HMAC: prover %x notary %x, want %x", macP, macN, want)
	}
}

// TestOverTCP runs a compression over a loopback TCP connection.
func TestOverTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	c := compressCircuit(t)
	state, block := randBytes(t, 32), randBytes(t, 64)
	want := compressRef(t, state, block)
	var got []byte
	must(t)(runOn(t, a, b, Config{}, nil, nil, func(ctx context.Context, s *Session) error {
		x, err := s.InputValue(ctx, Prover, 256, state)
		if err != nil {
			return err
		}
		y, err := s.InputValue(ctx, Prover, 512, block)
		if err != nil {
			return err
		}
		res, err := s.Call(ctx, c, x, y)
		if err != nil {
			return err
		}
		got, err = s.Open(ctx, res[0], ToProver)
		return err
	}, func(ctx context.Context, s *Session) error {
		x, _ := s.Input(Prover, 256)
		if err := s.Assign(ctx, x, nil); err != nil {
			return err
		}
		y, _ := s.Input(Prover, 512)
		if err := s.Assign(ctx, y, nil); err != nil {
			return err
		}
		res, err := s.Call(ctx, c, x, y)
		if err != nil {
			return err
		}
		_, err = s.Open(ctx, res[0], ToProver)
		return err
	}))
	if !bytes.Equal(got, want) {
		t.Fatalf("got %x want %x", got, want)
	}
}

func TestUsageErrors(t *testing.T) {
	c := compressCircuit(t)
	must(t)(run(t, Config{}, nil, nil, func(ctx context.Context, s *Session) error {
		x, _ := s.Input(Prover, 8)
		if err := s.Assign(ctx, x, nil); !errors.Is(err, ErrUsage) {
			t.Errorf("owner without value: %v", err)
		}
		if _, err := s.Call(ctx, c, x); !errors.Is(err, ErrUsage) {
			t.Errorf("call with 8 bits: %v", err)
		}
		y, _ := s.Input(Notary, 8)
		if _, err := s.Open(ctx, y, ToBoth); !errors.Is(err, ErrUsage) {
			t.Errorf("open unassigned: %v", err)
		}
		if err := s.Assign(ctx, x.Slice(0, 4), []byte{0}); !errors.Is(err, ErrUsage) {
			t.Errorf("assign a slice: %v", err)
		}
		if _, err := s.Input(Prover, 1<<30); !errors.Is(err, ErrLimit) {
			t.Errorf("huge input: %v", err)
		}
		if _, err := s.ECDH(ctx, make([]byte, 65)); !errors.Is(err, ErrUsage) {
			t.Errorf("ECDH without key share: %v", err)
		}
		if err := s.Assign(ctx, x, []byte{7}); err != nil {
			return err
		}
		if err := s.Assign(ctx, y, nil); err != nil {
			return err
		}
		_, err := s.Open(ctx, Concat(x, y), ToBoth)
		return err
	}, func(ctx context.Context, s *Session) error {
		x, _ := s.Input(Prover, 8)
		y, _ := s.Input(Notary, 8)
		if err := s.Assign(ctx, x, nil); err != nil {
			return err
		}
		if err := s.Assign(ctx, y, []byte{9}); err != nil {
			return err
		}
		got, err := s.Open(ctx, Concat(x, y), ToBoth)
		if err == nil && !bytes.Equal(got, []byte{7, 9}) {
			t.Errorf("opened %x", got)
		}
		return err
	}))
}

// TestCloseWipes: after Close a session holds neither offset, nor the
// proof's seed, nor its correlated OTs, nor its ECDHE scalar.
func TestCloseWipes(t *testing.T) {
	var sessions [2]*Session
	keep := func(i int) party {
		return func(ctx context.Context, s *Session) error {
			sessions[i] = s
			_, err := s.KeyShare(ctx)
			return err
		}
	}
	must(t)(run(t, Config{}, nil, nil, keep(0), keep(1)))
	for _, s := range sessions {
		if s.deltaA != (garble.Label{}) || s.deltaB != (garble.Label{}) || s.seedB != ([16]byte{}) {
			t.Errorf("%v: an offset or the seed survived Close", s.role)
		}
		for _, b := range append(append([]ot.Block(nil), s.poolA.q...), s.poolB.t...) {
			if b != (ot.Block{}) {
				t.Fatalf("%v: a correlated OT survived Close", s.role)
			}
		}
		for _, c := range s.kx.scalar {
			if c != 0 {
				t.Fatalf("%v: the scalar survived Close", s.role)
			}
		}
	}
}
