package twoparty

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/acds-project/acds/mpctls/mpc/circuit"
)

// The ideal functionality of the two-party engine, for tests of the TLS
// layer only: both parties' halves live in one process and share one
// table of plaintext values; every call meets its twin from the other
// side, checks that both asked the same (kind, circuit, value ids,
// audience), and computes in the clear with the real circuits. It shows
// that the TLS layer asks the engine for the right things; it protects
// nothing, and nothing outside this file can reach it.

type idealRef int

type idealVal struct {
	bits  int
	owner party
	data  []byte
	known bool
}

type meeting struct {
	kind string
	args [2]any
	n    int
	res  [2]any
	err  error
	done chan struct{}
}

// opened is one value the ideal engine opened, for the tests to compare
// with crypto/tls's key log.
type opened struct {
	to   audience
	data []byte
}

type idealHub struct {
	mu     sync.Mutex
	key    *ecdh.PrivateKey
	vals   map[idealRef]*idealVal
	meets  map[int]*meeting
	msgs   [2]chan []byte // to the prover, to the notary
	opened []opened
	// onOpen, when set, may change what an Open reveals (a misbehaving
	// party in negative tests).
	onOpen func(to audience, data []byte) []byte
	sent   [2]atomic.Int64
}

type idealSide struct {
	h    *idealHub
	side party
	ops  int
	vals idealRef
}

// idealPair returns the prover's and the notary's halves of one ideal
// session, and the hub the tests inspect.
func idealPair() (p, n *idealSide, h *idealHub) {
	h = &idealHub{vals: map[idealRef]*idealVal{}, meets: map[int]*meeting{}}
	h.msgs[prover] = make(chan []byte, 64)
	h.msgs[notary] = make(chan []byte, 64)
	return &idealSide{h: h, side: prover}, &idealSide{h: h, side: notary}, h
}

func (s *idealSide) meet(ctx context.Context, kind string, arg any, fn func(p, n any) (any, any, error)) (any, error) {
	i := s.ops
	s.ops++
	h := s.h
	h.mu.Lock()
	m := h.meets[i]
	if m == nil {
		m = &meeting{kind: kind, done: make(chan struct{})}
		h.meets[i] = m
	}
	if m.kind != kind {
		m.err = fmt.Errorf("%w: call %d is %s on one side, %s on the other", ErrProtocol, i, m.kind, kind)
	}
	m.args[s.side] = arg
	m.n++
	if m.n == 2 {
		if m.err == nil {
			m.res[prover], m.res[notary], m.err = fn(m.args[prover], m.args[notary])
		}
		close(m.done)
	}
	h.mu.Unlock()
	select {
	case <-m.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return m.res[s.side], m.err
}

func (s *idealSide) newRef(bits int, owner party) idealRef {
	id := s.vals
	s.vals++
	s.h.mu.Lock()
	if s.h.vals[id] == nil {
		s.h.vals[id] = &idealVal{bits: bits, owner: owner}
	}
	s.h.mu.Unlock()
	return id
}

func (s *idealSide) KeyShare(ctx context.Context) ([]byte, error) {
	r, err := s.meet(ctx, "keyshare", nil, func(_, _ any) (any, any, error) {
		k, err := ecdh.P256().GenerateKey(rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		s.h.key = k
		pub := k.PublicKey().Bytes()
		return pub, pub, nil
	})
	if err != nil {
		return nil, err
	}
	return r.([]byte), nil
}

func (s *idealSide) ECDH(ctx context.Context, serverShare []byte) (value, error) {
	id := s.newRef(256, -1)
	type arg struct {
		share []byte
		id    idealRef
	}
	_, err := s.meet(ctx, "ecdh", arg{serverShare, id}, func(p, n any) (any, any, error) {
		a, b := p.(arg), n.(arg)
		if !bytes.Equal(a.share, b.share) || a.id != b.id {
			return nil, nil, fmt.Errorf("%w: ecdh with different arguments", ErrProtocol)
		}
		pub, err := ecdh.P256().NewPublicKey(a.share)
		if err != nil {
			return nil, nil, err
		}
		x, err := s.h.key.ECDH(pub)
		if err != nil {
			return nil, nil, err
		}
		v := s.h.vals[a.id]
		v.data, v.known = x, true
		return nil, nil, nil
	})
	if err != nil {
		return nil, err
	}
	return id, nil
}

func (s *idealSide) Input(owner party, bits int) (value, error) { return s.newRef(bits, owner), nil }

func (s *idealSide) Assign(ctx context.Context, v value, data []byte) error {
	type arg struct {
		id   idealRef
		data []byte
	}
	_, err := s.meet(ctx, "assign", arg{v.(idealRef), data}, func(p, n any) (any, any, error) {
		a, b := p.(arg), n.(arg)
		if a.id != b.id {
			return nil, nil, fmt.Errorf("%w: assign of different values", ErrProtocol)
		}
		val := s.h.vals[a.id]
		own, other := a.data, b.data
		if val.owner == notary {
			own, other = b.data, a.data
		}
		if other != nil || len(own) != (val.bits+7)/8 {
			return nil, nil, fmt.Errorf("%w: assign of %d bytes to a %d-bit input of the %v", ErrProtocol, len(own), val.bits, val.owner)
		}
		val.data, val.known = append([]byte(nil), own...), true
		return nil, nil, nil
	})
	return err
}

func (s *idealSide) Call(ctx context.Context, c *circuit.Circuit, in ...value) ([]value, error) {
	ins := make([]idealRef, len(in))
	for i, v := range in {
		ins[i] = v.(idealRef)
	}
	outs := make([]idealRef, len(c.Outputs))
	res := make([]value, len(c.Outputs))
	for i, g := range c.Outputs {
		outs[i] = s.newRef(len(g), -1)
		res[i] = outs[i]
	}
	type arg struct {
		digest   [32]byte
		ins, out []idealRef
	}
	_, err := s.meet(ctx, "call", arg{c.Digest(), ins, outs}, func(p, n any) (any, any, error) {
		a, b := p.(arg), n.(arg)
		if a.digest != b.digest || fmt.Sprint(a.ins, a.out) != fmt.Sprint(b.ins, b.out) {
			return nil, nil, fmt.Errorf("%w: calls of different circuits or values", ErrProtocol)
		}
		data := make([][]byte, len(a.ins))
		for i, id := range a.ins {
			v := s.h.vals[id]
			if !v.known {
				return nil, nil, fmt.Errorf("%w: input %d unassigned", ErrProtocol, i)
			}
			data[i] = v.data
		}
		out, err := c.Eval(data...)
		if err != nil {
			return nil, nil, err
		}
		for i, id := range a.out {
			v := s.h.vals[id]
			v.data, v.known = out[i], true
		}
		return nil, nil, nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (s *idealSide) Open(ctx context.Context, v value, to audience) ([]byte, error) {
	type arg struct {
		id idealRef
		to audience
	}
	r, err := s.meet(ctx, "open", arg{v.(idealRef), to}, func(p, n any) (any, any, error) {
		a, b := p.(arg), n.(arg)
		if a != b {
			return nil, nil, fmt.Errorf("%w: open of different values or audiences", ErrProtocol)
		}
		val := s.h.vals[a.id]
		if !val.known {
			return nil, nil, fmt.Errorf("%w: open of an uncomputed value", ErrProtocol)
		}
		data := append([]byte(nil), val.data...)
		if s.h.onOpen != nil {
			data = s.h.onOpen(a.to, data)
		}
		s.h.opened = append(s.h.opened, opened{a.to, data})
		var rp, rn []byte
		if a.to != toNotary {
			rp = data
		}
		if a.to != toProver {
			rn = data
		}
		return rp, rn, nil
	})
	if err != nil {
		return nil, err
	}
	b, _ := r.([]byte)
	return b, nil
}

func (s *idealSide) Finalize(ctx context.Context) error {
	_, err := s.meet(ctx, "finalize", nil, func(_, _ any) (any, any, error) { return nil, nil, nil })
	return err
}

// idealMessages is one side of an in-process message channel.
type idealMessages struct {
	h    *idealHub
	side party
}

func (s *idealSide) messages() *idealMessages { return &idealMessages{h: s.h, side: s.side} }

func (s *idealMessages) Send(ctx context.Context, msg []byte) error {
	to := prover
	if s.side == prover {
		to = notary
	}
	s.h.sent[s.side].Add(int64(len(msg)))
	select {
	case s.h.msgs[to] <- append([]byte(nil), msg...):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *idealMessages) Recv(ctx context.Context, max int) ([]byte, error) {
	select {
	case m := <-s.h.msgs[s.side]:
		if len(m) > max {
			return nil, fmt.Errorf("%w: message of %d bytes", ErrProtocol, len(m))
		}
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *idealSide) Close() error { return nil }

// openedTo returns what the ideal engine opened, in order, to audience to.
func (h *idealHub) openedTo(to audience) [][]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out [][]byte
	for _, o := range h.opened {
		if o.to == to {
			out = append(out, o.data)
		}
	}
	return out
}
