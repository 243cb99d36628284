package mpc

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/acds-project/acds/mpctls/mpc/circuit"
	"github.com/acds-project/acds/mpctls/mpc/garble"
	"github.com/acds-project/acds/mpctls/mpc/ot"
)

// Role is a party of a session.
type Role uint8

// The two parties.
const (
	// Prover garbles the circuits and keeps its inputs private for ever.
	Prover Role = iota + 1
	// Notary evaluates; its inputs are revealed to the prover at Finalize.
	Notary
)

func (r Role) String() string {
	switch r {
	case Prover:
		return "prover"
	case Notary:
		return "notary"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// Audience says who learns an opened value.
type Audience uint8

// The audiences of Open.
const (
	ToProver Audience = iota + 1
	ToNotary
	ToBoth
)

// Config tunes a Session. The zero value is ready to use.
type Config struct {
	// Rand is the source of all randomness; nil means crypto/rand.
	Rand io.Reader
	// IdleTimeout bounds every wait for the peer: a read or write of the
	// connection that makes no progress for this long fails with
	// ErrTimeout. Zero means 30 seconds.
	IdleTimeout time.Duration
	// MaxANDs bounds the AND gates of all calls of the session; it also
	// bounds memory (the notary holds about 25 bytes of garbled tables
	// per AND until it evaluates them, the prover 16 bytes of the proof's
	// and 16 of its hashes until Finalize). Zero means 4,194,304.
	MaxANDs int
	// MaxInputBits bounds the input bits of the session. Zero means
	// 1,048,576.
	MaxInputBits int
	// OTBatch is the number of correlated OTs extended at a time in each
	// direction; a session extends again when it runs out. Zero means
	// 8,192.
	OTBatch int
}

func (c Config) withDefaults() Config {
	if c.Rand == nil {
		c.Rand = rand.Reader
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 30 * time.Second
	}
	if c.MaxANDs <= 0 {
		c.MaxANDs = 4 << 20
	}
	if c.MaxInputBits <= 0 {
		c.MaxInputBits = 1 << 20
	}
	if c.OTBatch <= 0 {
		c.OTBatch = 8192
	}
	c.OTBatch = min(c.OTBatch, ot.MaxBatch)
	return c
}

// Stats counts what a session has done so far.
type Stats struct {
	// Bytes sent and received, frame headers included, on the control and
	// bulk streams.
	ControlSent, ControlReceived, BulkSent, BulkReceived int64
	// ANDs is the number of AND gates called.
	ANDs int
	// InputBits is the number of input bits declared.
	InputBits int
	// OTs is the number of correlated OTs extended, in both directions.
	OTs int
	// Decoded is the number of bits opened.
	Decoded int
}

// Session is one party's side of a two-party computation over a
// connection. Both parties make the same calls in the same order. A
// Session is not safe for concurrent use, and after any error other than
// ErrUsage it is over: every later call returns the first error.
type Session struct {
	role  Role
	cfg   Config
	rand  io.Reader
	t     *transport
	sid   [32]byte
	hash  *garble.Hash
	err   error
	ended bool

	// The GA execution: P garbles under deltaA, N evaluates.
	deltaA garble.Label
	gaG    *garble.ThreeHalvesGarbler
	gaE    *garble.ThreeHalvesEvaluator
	// The GB execution (the proof): N garbles privacy-free under deltaB
	// with input labels from seedB; P evaluates at Finalize.
	deltaB garble.Label
	seedB  [16]byte
	labelB cipher.Block // AES under seedB, the PRG of GB input labels
	gbG    *garble.ProofGarbler

	// OT instance A: P is the sender (correlation deltaA), N the
	// receiver; it carries N's inputs. Instance B: N is the sender
	// (deltaB), P the receiver; it carries P's inputs and the ECDH
	// conversion.
	otAS, otBS *ot.Sender
	otAR, otBR *ot.Receiver
	// Instance B's base OTs, which N opens at Finalize to bind Δ_B: P
	// keeps both seeds of each, N the seeds of its choices.
	basePairsB [][2]ot.Seed
	baseSeedsB []ot.Seed
	poolA      cotPool
	poolB      cotPool

	bits     []sbit
	inputs   []*input
	calls    []*call
	decodes  []*decoding
	ands     uint64
	inBits   int // input bits declared
	deferred []pending
	nextRead int // N: the next call whose GA tables to read
	addMod   *circuit.Circuit
	kx       *keyExchange
	cheat    *cheats // nil outside tests

	// The garbling worker: P's execution-A garbling and N's proof
	// garbling run there, so that Call returns at once and garbling
	// overlaps the rest of the session.
	garbleq    chan *call
	workerDone chan struct{}
	stopped    bool
}

// cheats makes a party deviate, for the tests that show each deviation
// caught. Production sessions never set it.
type cheats struct {
	garble      func(k int, in []garble.Label, delta garble.Label) // P: garble with other input semantics
	tables      func(k int, t []byte)                              // tamper with outgoing tables
	corrections func(corr []byte)                                  // tamper with OT corrections sent
	decodeBits  func(perm []bool)                                  // P: tamper with decoding bits
	decoded     func(bits []bool)                                  // N: claim other decoded bits
	ignore      bool                                               // P: ignore failed decoding checks
	matrix      func(u []byte)                                     // tamper with an OT extension matrix
	ectfShare   func(share *[32]byte)                              // N: input another ECDH share
	reveal      func(r *finalReveal)                               // N: reveal other inputs
	open        func(open []byte)                                  // N: open another Δ or seed
}

// cotPool is one side's correlated OTs of an instance: the sender's q_j,
// or the receiver's choices r_j and t_j = q_j ⊕ r_j·Δ. All are kept: the
// prover replays instance B at Finalize.
type cotPool struct {
	q    []ot.Block
	r    []bool
	t    []ot.Block
	used int
}

func (p *cotPool) size() int { return max(len(p.q), len(p.t)) }

// The kinds of session bits.
const (
	fromInput = iota
	fromCall
	fromXor
)

// sbit is one bit held in the session: on P its GA zero label; on N its
// GB zero label and, once evaluated, its GA active label.
type sbit struct {
	kind int8
	have bool // N: a is known
	src  int32
	x, y uint32 // fromXor: the two bits
	a0   garble.Label
	a    garble.Label
	b0   garble.Label
}

type input struct {
	owner    Role
	bits     []uint32
	assigned bool
	value    []bool // the owner's bits (P learns N's at Finalize)
	random   bool   // a mask: its value is the owner's OT choices
	first    int    // the input's first global input-bit number
	cot      int    // the first correlated OT of its instance
	flips    []bool // the derandomized choices
	corr     []garble.Label
}

type call struct {
	c         *circuit.Circuit
	base      uint64
	args      []uint32
	outs      [][]uint32
	tables    []byte         // N: GA tables until evaluated; P: GB tables once read
	hashes    []garble.Label // P: the proof evaluation's hash per AND gate
	read      bool
	evaluated bool   // N: evaluated
	ready     bool   // every argument is available
	first     uint32 // the first output bit
	index     int

	// Garbling runs on the session's worker, call after call: src says
	// where each argument's zero label comes from; zero and werr are its
	// results, valid once done is closed.
	src  []labelSource
	zero [][]garble.Label
	werr error
	done chan struct{}
}

// labelSource is an argument's zero label for the worker: a label known
// when the call was made, or output (g, i) of an earlier call.
type labelSource struct {
	label garble.Label
	from  *call
	g, i  int
}

type decoding struct {
	bits   []uint32
	values []bool
}

// pending is a message of the peer due later in the control stream, with
// what to do with it; receives handle the pending ones first, in order.
type pending struct {
	typ    ftype
	handle func([]byte) error
}

// Value is a vector of secret bits held inside a session. Bit i of its
// byte form is bit 7-(i mod 8) of byte i/8. The zero Value is empty.
type Value struct {
	s     *Session
	bits  []uint32
	input int // 1 + the index of the input it is, or 0
}

// Len returns the number of bits of v.
func (v Value) Len() int { return len(v.bits) }

// Slice returns bits i to j-1 of v (free: no computation, no message).
func (v Value) Slice(i, j int) Value {
	return Value{s: v.s, bits: v.bits[i:j:j]}
}

// Concat returns the concatenation of values of one session (free).
func Concat(vs ...Value) Value {
	var out Value
	for _, v := range vs {
		if out.s == nil {
			out.s = v.s
		}
		out.bits = append(out.bits, v.bits...)
	}
	return out
}

// NewSession sets up a session with the peer on conn as role: it agrees
// on a session identifier, runs the base OTs of both directions and
// extends the first correlated OTs (about three round trips, 10–20 ms of
// computation per party). The session owns conn from then on and closes
// it in Close or on failure.
func NewSession(ctx context.Context, conn net.Conn, role Role, cfg Config) (*Session, error) {
	return newSession(ctx, conn, role, cfg, nil)
}

func newSession(ctx context.Context, conn net.Conn, role Role, cfg Config, cheat *cheats) (*Session, error) {
	if role != Prover && role != Notary {
		return nil, fmt.Errorf("%w: role %v", ErrUsage, role)
	}
	cfg = cfg.withDefaults()
	s := &Session{role: role, cfg: cfg, rand: cfg.Rand, cheat: cheat}
	maxIn := 32*cfg.MaxANDs + 16*cfg.MaxInputBits + 64<<20
	s.t = newTransport(conn, cfg.IdleTimeout, maxIn)
	if err := s.setup(ctx); err != nil {
		return nil, s.fail(err)
	}
	return s, nil
}

// fail ends the session with err (the first failure wins), telling the
// peer unless the peer is the one that ended it.
func (s *Session) fail(err error) error {
	if s.err != nil {
		return s.err
	}
	s.err = err
	if s.t != nil {
		s.t.abort(fmt.Sprintf("%s failed: %v", s.role, classOf(err)))
		<-s.t.readerEnd
	}
	s.stopWorker()
	return err
}

// classOf names an error's class for the abort message; the message
// never carries values.
func classOf(err error) string {
	for _, c := range []error{ErrCheat, ErrProtocol, ErrTruncated, ErrTimeout, ErrPeerAborted, ErrLimit, ErrClosed} {
		if errors.Is(err, c) {
			return c.Error()
		}
	}
	return "internal error"
}

// live reports the sticky error, if any.
func (s *Session) live() error {
	if s.err != nil {
		return s.err
	}
	if s.ended {
		return ErrClosed
	}
	return nil
}

// Close ends the session and closes the connection. It does not finalize:
// a notary signs nothing for a session that did not Finalize.
func (s *Session) Close() error {
	if s.t == nil {
		return nil
	}
	if !s.ended {
		s.ended = true
		s.stopWorker()
		if s.err == nil {
			s.t.close()
		}
	}
	s.wipe()
	return nil
}

// wipe zeroes the session's secrets it holds itself — the offsets, the
// proof's label seed, the ECDHE scalar, the correlated OTs — and drops
// the garblers, once no goroutine uses them.
func (s *Session) wipe() {
	wipeLabel(&s.deltaA)
	wipeLabel(&s.deltaB)
	clear(s.seedB[:])
	for _, p := range []*cotPool{&s.poolA, &s.poolB} {
		clear(p.q)
		clear(p.t)
	}
	if s.kx != nil {
		clear(s.kx.scalar)
	}
	s.gaG, s.gbG, s.labelB = nil, nil, nil
}

func wipeLabel(l *garble.Label) { *l = garble.Label{} }

// Stats returns the session's counters.
func (s *Session) Stats() Stats {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	st := Stats{
		ControlSent: s.t.sent[control], ControlReceived: s.t.received[control],
		BulkSent: s.t.sent[bulk], BulkReceived: s.t.received[bulk],
		ANDs: int(s.ands), InputBits: s.inBits, OTs: s.poolA.size() + s.poolB.size(),
	}
	for _, d := range s.decodes {
		st.Decoded += len(d.bits)
	}
	return st
}

// send queues a control message.
func (s *Session) send(typ ftype, payload []byte) error { return s.t.send(control, typ, payload) }

// expect registers a control message of the peer due now, to be handled
// when a later receive reaches it.
func (s *Session) expect(typ ftype, handle func([]byte) error) {
	s.deferred = append(s.deferred, pending{typ, handle})
}

// drain handles every pending message.
func (s *Session) drain(ctx context.Context) error {
	for len(s.deferred) > 0 {
		p := s.deferred[0]
		s.deferred = s.deferred[1:]
		msg, err := s.t.recv(ctx, control, p.typ)
		if err != nil {
			return err
		}
		if err := p.handle(msg); err != nil {
			return err
		}
	}
	return nil
}

// recv returns the next control message, of type typ, after the pending
// ones.
func (s *Session) recv(ctx context.Context, typ ftype) ([]byte, error) {
	if err := s.drain(ctx); err != nil {
		return nil, err
	}
	return s.t.recv(ctx, control, typ)
}

// The session's domain-separated hash.
func (s *Session) digest(label string, parts ...[]byte) [32]byte {
	h := sha256.New()
	h.Write([]byte("acds mpc v1 "))
	h.Write([]byte(label))
	h.Write(s.sid[:])
	for _, p := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// setup runs the hello, the base OTs of both instances and the first
// extension of both.
func (s *Session) setup(ctx context.Context) error {
	var nonce [32]byte
	if _, err := io.ReadFull(s.rand, nonce[:]); err != nil {
		return err
	}
	hello := append([]byte("acds-mpc-1"), byte(s.role))
	hello = append(hello, nonce[:]...)
	if err := s.send(tHello, hello); err != nil {
		return err
	}
	peer, err := s.recv(ctx, tHello)
	if err != nil {
		return err
	}
	if len(peer) != len(hello) || string(peer[:10]) != "acds-mpc-1" {
		return fmt.Errorf("%w: not an acds-mpc-1 peer", ErrProtocol)
	}
	if Role(peer[10]) == s.role || (Role(peer[10]) != Prover && Role(peer[10]) != Notary) {
		return fmt.Errorf("%w: the peer is a %v too", ErrProtocol, Role(peer[10]))
	}
	np, nn := nonce[:], peer[11:]
	if s.role == Notary {
		np, nn = nn, np
	}
	h := sha256.New()
	h.Write([]byte("acds mpc session id"))
	h.Write(np)
	h.Write(nn)
	h.Sum(s.sid[:0])
	var hk [16]byte
	hd := s.digest("garbling hash key")
	copy(hk[:], hd[:16])
	s.hash = garble.NewHash(hk)

	// Base OTs: this party is the base sender of the instance where it is
	// the extension receiver, and the base receiver (choices Δ) of the
	// instance where it is the extension sender.
	delta, err := garble.RandomDelta(s.rand)
	if err != nil {
		return err
	}
	mine := ot.Block(delta)
	sidA, sidB := s.digest("base ot A"), s.digest("base ot B")
	sidRecv, sidSend := sidA[:], sidB[:] // P: receiver of A's base OTs, sender of B's
	if s.role == Notary {
		sidRecv, sidSend = sidB[:], sidA[:]
	}
	bs, sMsg, err := ot.NewBaseSender(s.rand, sidSend, ot.Kappa)
	if err != nil {
		return err
	}
	br, rMsg, err := ot.NewBaseReceiver(s.rand, sidRecv, ot.DeltaChoices(mine))
	if err != nil {
		return err
	}
	if err := s.send(tBaseOT, append(sMsg, rMsg...)); err != nil {
		return err
	}
	msg, err := s.recv(ctx, tBaseOT)
	if err != nil {
		return err
	}
	if len(msg) != len(sMsg)+len(rMsg) {
		return fmt.Errorf("%w: base OT message of %d bytes", ErrProtocol, len(msg))
	}
	pairs, err := bs.Finish(msg[len(sMsg):])
	if err != nil {
		return protocolErr(err)
	}
	seeds, err := br.Finish(msg[:len(sMsg)])
	if err != nil {
		return protocolErr(err)
	}
	sender, err := ot.NewSender(mine, seeds)
	if err != nil {
		return err
	}
	receiver, err := ot.NewReceiver(pairs)
	if err != nil {
		return err
	}
	if s.role == Prover {
		s.deltaA = delta
		s.otAS, s.otBR = sender, receiver
		s.basePairsB = pairs
		if s.gaG, err = garble.NewThreeHalvesGarbler(s.hash, delta, s.rand); err != nil {
			return err
		}
	} else {
		s.deltaB = delta
		s.otBS, s.otAR = sender, receiver
		s.baseSeedsB = seeds
		if _, err := io.ReadFull(s.rand, s.seedB[:]); err != nil {
			return err
		}
		if s.labelB, err = aes.NewCipher(s.seedB[:]); err != nil {
			return err
		}
		s.gbG = garble.NewProofGarbler(s.hash, delta)
		s.gaE = garble.NewThreeHalvesEvaluator(s.hash)
	}
	s.garbleq = make(chan *call, 1<<16)
	s.workerDone = make(chan struct{})
	go s.worker()
	return s.extend(ctx, true, true)
}

// worker garbles the calls queued by Call, in order, and queues their
// tables on the bulk stream.
func (s *Session) worker() {
	defer close(s.workerDone)
	for cl := range s.garbleq {
		labels := make([]garble.Label, len(cl.src))
		for i, src := range cl.src {
			if src.from != nil {
				labels[i] = src.from.zero[src.g][src.i]
			} else {
				labels[i] = src.label
			}
		}
		var tables []byte
		if s.role == Prover {
			if s.cheat != nil && s.cheat.garble != nil {
				s.cheat.garble(cl.index, labels, s.deltaA)
			}
			cl.zero, tables, cl.werr = s.gaG.Garble(cl.c, cl.base, labels, make([]byte, 0, garble.ThreeHalvesSize(cl.c.ANDs())))
		} else {
			cl.zero, tables, cl.werr = s.gbG.Garble(cl.c, cl.base, labels, make([]byte, 0, garble.PrivacyFreeGateSize*cl.c.ANDs()))
		}
		if cl.werr == nil {
			if s.cheat != nil && s.cheat.tables != nil {
				s.cheat.tables(cl.index, tables)
			}
			cl.werr = s.t.sendBulk(tTables, tables)
		}
		close(cl.done)
	}
}

// stopWorker ends the garbling worker once it has finished what is queued.
func (s *Session) stopWorker() {
	if s.garbleq != nil && !s.stopped {
		s.stopped = true
		close(s.garbleq)
		<-s.workerDone
	}
}

// zeroLabel returns this party's zero label of bit w — P's of execution
// A, N's of the proof — waiting for the garbling of the call that makes
// it.
func (s *Session) zeroLabel(w uint32) (garble.Label, error) {
	b := &s.bits[w]
	if b.kind == fromCall {
		cl := s.calls[b.src]
		<-cl.done
		if cl.werr != nil {
			return garble.Label{}, cl.werr
		}
		return cl.zero[b.x][b.y], nil
	}
	if s.role == Prover {
		return b.a0, nil
	}
	return b.b0, nil
}

func protocolErr(err error) error { return fmt.Errorf("%w: %v", ErrProtocol, err) }

// extend runs one batch of OT extension in instance A, B or both (in
// parallel: 1.5 round trips).
func (s *Session) extend(ctx context.Context, a, b bool) error {
	n := s.cfg.OTBatch
	// Which of this party's objects take part: it is the receiver of the
	// instance it does not hold Δ for.
	var recv *ot.Receiver
	var send *ot.Sender
	var recvPool, sendPool *cotPool
	recvOn, sendOn := false, false
	if s.role == Prover {
		recv, send, recvPool, sendPool = s.otBR, s.otAS, &s.poolB, &s.poolA
		recvOn, sendOn = b, a
	} else {
		recv, send, recvPool, sendPool = s.otAR, s.otBS, &s.poolA, &s.poolB
		recvOn, sendOn = a, b
	}
	if recvOn {
		u, err := recv.Extend(n, s.rand)
		if err != nil {
			return err
		}
		if s.cheat != nil && s.cheat.matrix != nil {
			s.cheat.matrix(u)
		}
		if err := s.send(tExtMatrix, u); err != nil {
			return err
		}
	}
	if sendOn {
		u, err := s.recv(ctx, tExtMatrix)
		if err != nil {
			return err
		}
		chal, err := send.Expand(u, n, s.rand)
		if err != nil {
			return protocolErr(err)
		}
		if err := s.send(tExtChallenge, chal); err != nil {
			return err
		}
	}
	if recvOn {
		chal, err := s.recv(ctx, tExtChallenge)
		if err != nil {
			return err
		}
		resp, r, t, err := recv.Respond(chal)
		if err != nil {
			return protocolErr(err)
		}
		if err := s.send(tExtResponse, resp); err != nil {
			return err
		}
		recvPool.r = append(recvPool.r, r...)
		recvPool.t = append(recvPool.t, t...)
	}
	if sendOn {
		resp, err := s.recv(ctx, tExtResponse)
		if err != nil {
			return err
		}
		q, err := send.Check(resp)
		if err != nil {
			if errors.Is(err, ot.ErrConsistency) {
				return fmt.Errorf("%w: OT extension: %v", ErrCheat, err)
			}
			return protocolErr(err)
		}
		sendPool.q = append(sendPool.q, q...)
	}
	return nil
}

// reserve makes sure n more correlated OTs are left in the pool of
// instance A (for N's inputs) or B (for P's), extending if needed, and
// returns the index of the first. Both parties run out at the same call.
func (s *Session) reserve(ctx context.Context, instanceA bool, n int) (int, error) {
	pool := &s.poolB
	if instanceA {
		pool = &s.poolA
	}
	for pool.used+n > pool.size() {
		if err := s.extend(ctx, instanceA, !instanceA); err != nil {
			return 0, err
		}
	}
	first := pool.used
	pool.used += n
	return first, nil
}

// gbInputLabel is N's GB zero label of global input bit k: AES under
// seedB of k, which P recomputes once N opens seedB.
func gbInputLabel(b cipher.Block, k int) garble.Label {
	var in, out [16]byte
	binary.BigEndian.PutUint64(in[8:], uint64(k))
	b.Encrypt(out[:], in[:])
	return garble.LabelOf(out[:])
}

func (s *Session) own(v Value) error {
	if v.s != s {
		return fmt.Errorf("%w: a Value of another session", ErrUsage)
	}
	return nil
}

// Input declares a private input of owner of n bits and returns it as a
// Value. Nothing is sent: the value comes later with Assign, and calls may
// use the input before.
func (s *Session) Input(owner Role, n int) (Value, error) {
	if err := s.live(); err != nil {
		return Value{}, err
	}
	if owner != Prover && owner != Notary || n <= 0 {
		return Value{}, fmt.Errorf("%w: input of %d bits for %v", ErrUsage, n, owner)
	}
	if s.inBits+n > s.cfg.MaxInputBits {
		return Value{}, fmt.Errorf("%w: more than %d input bits", ErrLimit, s.cfg.MaxInputBits)
	}
	in := &input{owner: owner, first: s.inBits}
	for i := 0; i < n; i++ {
		b := sbit{kind: fromInput, src: int32(len(s.inputs))}
		if s.role == Prover {
			l, err := garble.RandomLabel(s.rand)
			if err != nil {
				return Value{}, s.fail(err)
			}
			b.a0 = l
		} else {
			b.b0 = gbInputLabel(s.labelB, s.inBits+i)
		}
		in.bits = append(in.bits, uint32(len(s.bits)))
		s.bits = append(s.bits, b)
	}
	s.inBits += n
	s.inputs = append(s.inputs, in)
	return Value{s: s, bits: in.bits, input: len(s.inputs)}, nil
}

// Assign gives a declared input its value. Both parties call it for the
// same input; the owner passes the value (⌈n/8⌉ bytes, big-endian bit
// order, unused low bits of the last byte zero), the other nil.
func (s *Session) Assign(ctx context.Context, v Value, value []byte) error {
	if err := s.live(); err != nil {
		return err
	}
	if err := s.own(v); err != nil {
		return err
	}
	if v.input == 0 {
		return fmt.Errorf("%w: Assign of a Value that is not a declared input", ErrUsage)
	}
	in := s.inputs[v.input-1]
	if in.assigned {
		return fmt.Errorf("%w: input assigned twice", ErrUsage)
	}
	mine := in.owner == s.role
	if mine != (value != nil) {
		return fmt.Errorf("%w: the owner, and only the owner, passes the value", ErrUsage)
	}
	var bits []bool
	if mine {
		var err error
		if bits, err = circuit.BitsOf(value, len(in.bits)); err != nil {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
	}
	if err := s.assign(ctx, in, bits); err != nil {
		return s.fail(err)
	}
	return nil
}

func (s *Session) assign(ctx context.Context, in *input, bits []bool) error {
	n := len(in.bits)
	in.assigned = true
	in.value = bits
	switch {
	case in.owner == Prover && s.role == Prover:
		// GA: P sends its active labels. GB: P's labels come from
		// instance B (P receives) with derandomized choices.
		first, err := s.reserve(ctx, false, n)
		if err != nil {
			return err
		}
		in.cot = first
		msg := make([]byte, 0, 16*n+(n+7)/8)
		flips := make([]bool, n)
		for i, w := range in.bits {
			msg = putLabels(msg, []garble.Label{s.bits[w].a0.Select(b2u(bits[i]), s.deltaA)})
			flips[i] = bits[i] != s.poolB.r[first+i]
		}
		in.flips = flips
		msg = append(msg, putBits(flips)...)
		if err := s.send(tInputLabels, msg); err != nil {
			return err
		}
		s.expect(tInputGBCorr, func(m []byte) error {
			corr, err := parseLabels(m, n)
			in.corr = corr
			return err
		})
	case in.owner == Prover && s.role == Notary:
		first, err := s.reserve(ctx, false, n)
		if err != nil {
			return err
		}
		in.cot = first
		msg, err := s.recv(ctx, tInputLabels)
		if err != nil {
			return err
		}
		labels, flips, err := parseInputLabels(msg, n)
		if err != nil {
			return err
		}
		in.flips = flips
		corr := make([]byte, 0, 16*n)
		for i, w := range in.bits {
			b := &s.bits[w]
			b.a, b.have = labels[i], true
			// e = L ⊕ q ⊕ f·Δ_B: P's t ⊕ e is the label of its choice.
			q := garble.Label(s.poolB.q[first+i])
			corr = putLabels(corr, []garble.Label{b.b0.Xor(q).Select(b2u(flips[i]), s.deltaB)})
		}
		if s.cheat != nil && s.cheat.corrections != nil {
			s.cheat.corrections(corr)
		}
		return s.send(tInputGBCorr, corr)
	case in.owner == Notary && s.role == Notary:
		first, err := s.reserve(ctx, true, n)
		if err != nil {
			return err
		}
		in.cot = first
		flips := make([]bool, n)
		for i := range flips {
			flips[i] = bits[i] != s.poolA.r[first+i]
		}
		in.flips = flips
		if err := s.send(tInputFlips, putBits(flips)); err != nil {
			return err
		}
		s.expect(tInputGACorr, func(m []byte) error {
			corr, err := parseLabels(m, n)
			if err != nil {
				return err
			}
			for i, w := range in.bits {
				b := &s.bits[w]
				b.a, b.have = garble.Label(s.poolA.t[first+i]).Xor(corr[i]), true
			}
			return nil
		})
	case in.owner == Notary && s.role == Prover:
		first, err := s.reserve(ctx, true, n)
		if err != nil {
			return err
		}
		in.cot = first
		msg, err := s.recv(ctx, tInputFlips)
		if err != nil {
			return err
		}
		flips, err := parseBits(msg, n)
		if err != nil {
			return err
		}
		in.flips = flips
		corr := make([]byte, 0, 16*n)
		for i, w := range in.bits {
			q := garble.Label(s.poolA.q[first+i])
			corr = putLabels(corr, []garble.Label{s.bits[w].a0.Xor(q).Select(b2u(flips[i]), s.deltaA)})
		}
		if s.cheat != nil && s.cheat.corrections != nil {
			s.cheat.corrections(corr)
		}
		return s.send(tInputGACorr, corr)
	}
	return nil
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// InputValue declares an input and assigns it at once.
func (s *Session) InputValue(ctx context.Context, owner Role, n int, value []byte) (Value, error) {
	v, err := s.Input(owner, n)
	if err != nil {
		return v, err
	}
	return v, s.Assign(ctx, v, value)
}

// Call computes circuit c on args, whose lengths must add up to c's input
// groups in order, and returns one Value per output group. It returns at
// once: each party's worker garbles the call (the prover its execution,
// the notary the proof) and streams the tables, and the notary evaluates
// when a value that depends on the call is opened.
func (s *Session) Call(ctx context.Context, c *circuit.Circuit, args ...Value) ([]Value, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	var in []uint32
	for _, a := range args {
		if err := s.own(a); err != nil {
			return nil, err
		}
		in = append(in, a.bits...)
	}
	if len(in) != c.InputBits() {
		return nil, fmt.Errorf("%w: %d argument bits for a circuit of %d", ErrUsage, len(in), c.InputBits())
	}
	nout := 0
	for _, g := range c.Outputs {
		nout += len(g)
	}
	if nout == 0 {
		return nil, fmt.Errorf("%w: a circuit without outputs", ErrUsage)
	}
	if int(s.ands)+c.ANDs() > s.cfg.MaxANDs {
		return nil, fmt.Errorf("%w: more than %d AND gates", ErrLimit, s.cfg.MaxANDs)
	}
	k := len(s.calls)
	cl := &call{c: c, base: s.ands, args: in, index: k, done: make(chan struct{})}
	cl.src = make([]labelSource, len(in))
	for i, w := range in {
		b := &s.bits[w]
		if b.kind == fromCall {
			cl.src[i] = labelSource{from: s.calls[b.src], g: int(b.x), i: int(b.y)}
			continue
		}
		l, err := s.zeroLabel(w)
		if err != nil {
			return nil, s.fail(err)
		}
		cl.src[i] = labelSource{label: l}
	}
	s.ands += uint64(c.ANDs())
	cl.outs = make([][]uint32, len(c.Outputs))
	for g, grp := range c.Outputs {
		for i := range grp {
			cl.outs[g] = append(cl.outs[g], uint32(len(s.bits)))
			s.bits = append(s.bits, sbit{kind: fromCall, src: int32(k), x: uint32(g), y: uint32(i)})
		}
	}
	for _, g := range cl.outs {
		if len(g) > 0 {
			cl.first = g[0]
			break
		}
	}
	s.calls = append(s.calls, cl)
	digest := c.Digest()
	if err := s.send(tCall, putCall(k, cl.base, digest)); err != nil {
		return nil, s.fail(err)
	}
	s.expect(tCall, func(m []byte) error {
		idx, base, d, err := parseCall(m)
		if err != nil {
			return err
		}
		if idx != k || base != cl.base || d != digest {
			return fmt.Errorf("%w: call %d of the peer is not this call %d (another circuit or order)", ErrProtocol, idx, k)
		}
		return nil
	})
	s.garbleq <- cl
	vs := make([]Value, len(cl.outs))
	for g, ws := range cl.outs {
		vs[g] = Value{s: s, bits: ws}
	}
	return vs, nil
}

// available reports whether bit w depends only on assigned inputs, the
// same on both sides.
func (s *Session) available(w uint32) bool {
	b := &s.bits[w]
	switch b.kind {
	case fromInput:
		return s.inputs[b.src].assigned
	case fromXor:
		return s.available(b.x) && s.available(b.y)
	}
	cl := s.calls[b.src]
	if !cl.ready {
		for _, a := range cl.args {
			if !s.available(a) {
				return false
			}
		}
		cl.ready = true
	}
	return true
}

// xor returns a new session bit x ⊕ y (free).
func (s *Session) xor(x, y uint32) (uint32, error) {
	b := sbit{kind: fromXor, x: x, y: y}
	lx, err := s.zeroLabel(x)
	if err != nil {
		return 0, err
	}
	ly, err := s.zeroLabel(y)
	if err != nil {
		return 0, err
	}
	if s.role == Prover {
		b.a0 = lx.Xor(ly)
	} else {
		b.b0 = lx.Xor(ly)
	}
	s.bits = append(s.bits, b)
	return uint32(len(s.bits) - 1), nil
}

// active returns N's GA active label of bit w, evaluating what it needs.
func (s *Session) active(ctx context.Context, w uint32) (garble.Label, error) {
	b := &s.bits[w]
	if b.have {
		return b.a, nil
	}
	switch b.kind {
	case fromXor:
		x, err := s.active(ctx, b.x)
		if err != nil {
			return x, err
		}
		y, err := s.active(ctx, b.y)
		if err != nil {
			return y, err
		}
		b = &s.bits[w]
		b.a, b.have = x.Xor(y), true
	case fromCall:
		if err := s.evaluate(ctx, int(b.src)); err != nil {
			return garble.Label{}, err
		}
		b = &s.bits[w]
	case fromInput:
		// An input's label arrives with its pending correction.
		if err := s.drain(ctx); err != nil {
			return garble.Label{}, err
		}
		b = &s.bits[w]
	}
	if !b.have {
		return garble.Label{}, fmt.Errorf("%w: no label for bit %d", ErrProtocol, w)
	}
	return b.a, nil
}

// evaluate has N evaluate call k: it reads the GA tables of every call up
// to k (they arrive in call order) and evaluates call k.
func (s *Session) evaluate(ctx context.Context, k int) error {
	for s.nextRead <= k {
		cl := s.calls[s.nextRead]
		t, err := s.t.recvBulk(ctx, tTables, garble.ThreeHalvesSize(cl.c.ANDs()))
		if err != nil {
			return err
		}
		cl.tables, cl.read = t, true
		s.nextRead++
	}
	cl := s.calls[k]
	if cl.evaluated {
		return nil
	}
	in := make([]garble.Label, len(cl.args))
	for i, w := range cl.args {
		l, err := s.active(ctx, w)
		if err != nil {
			return err
		}
		in[i] = l
	}
	outs, err := s.gaE.Evaluate(cl.c, cl.base, in, cl.tables)
	if err != nil {
		return protocolErr(err)
	}
	for g, ls := range outs {
		for i, l := range ls {
			b := &s.bits[cl.outs[g][i]]
			b.a, b.have = l, true
		}
	}
	cl.tables, cl.evaluated = nil, true
	return nil
}

// mask declares a random input of owner of n bits whose value is the
// owner's random choices in n fresh correlated OTs of the instance that
// carries its inputs, and returns it with its value (on the owner). Such
// an input costs no choice message: the OT's q_j is the zero label of the
// other party's execution. Only the prover's execution-A labels travel
// (it garbles), with no Δ-correction to wait for.
func (s *Session) mask(ctx context.Context, owner Role, n int) (Value, []byte, error) {
	v, err := s.Input(owner, n)
	if err != nil {
		return v, nil, err
	}
	in := s.inputs[v.input-1]
	in.assigned, in.random = true, true
	if err := s.maskInput(ctx, in); err != nil {
		return v, nil, s.fail(err)
	}
	if owner != s.role {
		return v, nil, nil
	}
	return v, circuit.BytesOf(in.value), nil
}

func (s *Session) maskInput(ctx context.Context, in *input) error {
	n := len(in.bits)
	first, err := s.reserve(ctx, in.owner == Notary, n)
	if err != nil {
		return err
	}
	in.cot = first
	switch {
	case in.owner == Notary && s.role == Notary:
		in.value = append([]bool(nil), s.poolA.r[first:first+n]...)
		for i, w := range in.bits {
			b := &s.bits[w]
			b.a, b.have = garble.Label(s.poolA.t[first+i]), true
		}
	case in.owner == Notary && s.role == Prover:
		for i, w := range in.bits {
			s.bits[w].a0 = garble.Label(s.poolA.q[first+i])
		}
	case in.owner == Prover && s.role == Prover:
		in.value = append([]bool(nil), s.poolB.r[first:first+n]...)
		msg := make([]byte, 0, 16*n)
		for i, w := range in.bits {
			msg = putLabels(msg, []garble.Label{s.bits[w].a0.Select(b2u(in.value[i]), s.deltaA)})
		}
		return s.send(tMaskLabels, msg)
	case in.owner == Prover && s.role == Notary:
		msg, err := s.recv(ctx, tMaskLabels)
		if err != nil {
			return err
		}
		labels, err := parseLabels(msg, n)
		if err != nil {
			return err
		}
		for i, w := range in.bits {
			b := &s.bits[w]
			b.a, b.have = labels[i], true
			b.b0 = garble.Label(s.poolB.q[first+i])
		}
	}
	return nil
}

// Open reveals v to the audience and returns its bytes there (nil on the
// other side). Every opening is checked at Finalize.
func (s *Session) Open(ctx context.Context, v Value, to Audience) ([]byte, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	if err := s.own(v); err != nil {
		return nil, err
	}
	if to != ToProver && to != ToNotary && to != ToBoth {
		return nil, fmt.Errorf("%w: audience %d", ErrUsage, to)
	}
	if err := s.checkAvailable(v); err != nil {
		return nil, err
	}
	w := v
	var mval []byte
	if to != ToBoth {
		owner := Prover
		if to == ToNotary {
			owner = Notary
		}
		m, val, err := s.mask(ctx, owner, v.Len())
		if err != nil {
			return nil, err
		}
		mval = val
		if w, err = s.xorValues(v, m); err != nil {
			return nil, s.fail(err)
		}
	}
	bits, err := s.decode(ctx, w, to == ToNotary)
	if err != nil {
		return nil, s.fail(err)
	}
	switch {
	case to == ToBoth:
		return circuit.BytesOf(bits), nil
	case mval != nil:
		return xorBytes(circuit.BytesOf(bits), mval), nil
	}
	return nil, nil
}

// Share leaves v shared: the prover gets v ⊕ m and the notary m, for a
// fresh random m of the notary's; neither learns v. Opening v later (for
// instance to the prover once the notary has committed to the records it
// protects) reveals it.
func (s *Session) Share(ctx context.Context, v Value) ([]byte, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	if err := s.own(v); err != nil {
		return nil, err
	}
	if err := s.checkAvailable(v); err != nil {
		return nil, err
	}
	mp, pval, err := s.mask(ctx, Prover, v.Len())
	if err != nil {
		return nil, err
	}
	mn, nval, err := s.mask(ctx, Notary, v.Len())
	if err != nil {
		return nil, err
	}
	w, err := s.xorValues(v, mp)
	if err == nil {
		w, err = s.xorValues(w, mn)
	}
	if err != nil {
		return nil, s.fail(err)
	}
	bits, err := s.decode(ctx, w, false)
	if err != nil {
		return nil, s.fail(err)
	}
	if s.role == Prover {
		return xorBytes(circuit.BytesOf(bits), pval), nil
	}
	return nval, nil
}

func (s *Session) checkAvailable(v Value) error {
	for _, w := range v.bits {
		if !s.available(w) {
			return fmt.Errorf("%w: the value depends on an input not yet assigned", ErrUsage)
		}
	}
	return nil
}

func (s *Session) xorValues(a, b Value) (Value, error) {
	out := Value{s: s, bits: make([]uint32, len(a.bits))}
	for i := range a.bits {
		w, err := s.xor(a.bits[i], b.bits[i])
		if err != nil {
			return out, err
		}
		out.bits[i] = w
	}
	return out, nil
}

func xorBytes(a, b []byte) []byte {
	out := make([]byte, len(a))
	for i := range a {
		out[i] = a[i] ^ b[i]
	}
	return out
}

// decode opens w to both parties: P sends the permute bits of its zero
// labels, N answers with the bits and a hash of the active labels, which
// P checks (N cannot name a bit it has not the label of). lazy: P does
// not wait for the answer.
func (s *Session) decode(ctx context.Context, w Value, lazy bool) ([]bool, error) {
	n := w.Len()
	idx := len(s.decodes)
	d := &decoding{bits: w.bits}
	s.decodes = append(s.decodes, d)
	if s.role == Prover {
		perm := make([]bool, n)
		zero := make([]garble.Label, n)
		for i, b := range w.bits {
			l, err := s.zeroLabel(b)
			if err != nil {
				return nil, err
			}
			zero[i] = l
			perm[i] = l.LSB() == 1
		}
		if s.cheat != nil && s.cheat.decodeBits != nil {
			s.cheat.decodeBits(perm)
		}
		if err := s.send(tDecodeBits, putBits(perm)); err != nil {
			return nil, err
		}
		check := func(m []byte) error {
			bits, h, err := parseDecoded(m, n)
			if err != nil {
				return err
			}
			labels := make([]garble.Label, n)
			for i := range labels {
				labels[i] = zero[i].Select(b2u(bits[i]), s.deltaA)
			}
			if s.labelHash(idx, labels) != h && (s.cheat == nil || !s.cheat.ignore) {
				return fmt.Errorf("%w: the notary's decoding %d is not that of its labels", ErrCheat, idx)
			}
			d.values = bits
			return nil
		}
		if lazy {
			s.expect(tDecoded, check)
			return nil, nil
		}
		m, err := s.recv(ctx, tDecoded)
		if err != nil {
			return nil, err
		}
		if err := check(m); err != nil {
			return nil, err
		}
		return d.values, nil
	}
	m, err := s.recv(ctx, tDecodeBits)
	if err != nil {
		return nil, err
	}
	perm, err := parseBits(m, n)
	if err != nil {
		return nil, err
	}
	labels := make([]garble.Label, n)
	bits := make([]bool, n)
	for i, b := range w.bits {
		l, err := s.active(ctx, b)
		if err != nil {
			return nil, err
		}
		labels[i] = l
		bits[i] = (l.LSB() == 1) != perm[i]
	}
	h := s.labelHash(idx, labels)
	if s.cheat != nil && s.cheat.decoded != nil {
		s.cheat.decoded(bits)
	}
	d.values = bits
	if err := s.send(tDecoded, append(putBits(bits), h[:]...)); err != nil {
		return nil, err
	}
	return bits, nil
}

func (s *Session) labelHash(idx int, labels []garble.Label) [32]byte {
	return s.digest("decoding", binary.BigEndian.AppendUint32(nil, uint32(idx)), putLabels(nil, labels))
}
