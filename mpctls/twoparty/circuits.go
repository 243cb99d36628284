package twoparty

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/acds-project/acds/mpctls"
	"github.com/acds-project/acds/mpctls/mpc/circuit"
)

// The key schedules as circuits. Every HMAC-SHA256 with a secret key is
// computed in the reduced form: the two midstates H(k⊕ipad) and H(k⊕opad)
// are compressions in the circuit; the inner midstate is opened to both
// parties, who compute each inner hash locally (the notary feeds it back
// as its input); each HMAC output costs one compression from the outer
// midstate, which never leaves the engine. The circuits do not depend on
// the session, so they are built once and garbled ahead.
//
// An inner hash the notary feeds in chooses which HMAC of the secret key
// the circuit computes. Where that output is opened to the notary, a
// notary choosing the inner hash of another derivation would have that
// secret opened to it (derived(HS) in place of SHTS gives it the master
// secret; in TLS 1.2 an A(i) slot is an oracle for the key block). So
// those circuits take the prover's own copy of each such inner hash as
// well and output a check bit, the AND of their equalities, after the
// first output group (or as the first group, when that is opened to
// both), which is opened to the prover first: it takes part in opening
// anything to the notary only if the bit is set.

// Sizes in bits.
const (
	stateBits = 256
	blockBits = 512
)

// pad96 is the second SHA-256 block of a 96-byte message whose last 32
// bytes are x: x, the 0x80 marker, zeros, and the length (768 bits). It
// completes both an HMAC outer hash (opad block ‖ inner hash) and an
// inner hash over a 32-byte message (ipad block ‖ message).
func pad96(x []circuit.Wire) []circuit.Wire {
	var tail [32]byte
	tail[0] = 0x80
	binary.BigEndian.PutUint64(tail[24:], 96*8)
	return circuit.Concat(x, circuit.Const(tail[:], 256))
}

// keyBlock is an HMAC key of up to 64 bytes, zero-padded to one block and
// XORed with the pad byte (0x36 for ipad, 0x5c for opad).
func keyBlock(b *circuit.Builder, key []circuit.Wire, pad byte) []circuit.Wire {
	padded := circuit.Concat(key, circuit.Const(make([]byte, 64), blockBits-len(key)))
	var pads [64]byte
	for i := range pads {
		pads[i] = pad
	}
	return b.XORs(padded, circuit.Const(pads[:], blockBits))
}

// hmacPads returns the inner and outer midstates of an HMAC key.
func hmacPads(b *circuit.Builder, key []circuit.Wire) (inner, outer []circuit.Wire) {
	iv := circuit.Const(circuit.SHA256IV[:], stateBits)
	return circuit.SHA256Compress(b, iv, keyBlock(b, key, 0x36)), circuit.SHA256Compress(b, iv, keyBlock(b, key, 0x5c))
}

// hmacOut returns the HMAC output from its outer midstate and inner hash.
func hmacOut(b *circuit.Builder, outer, inner []circuit.Wire) []circuit.Wire {
	return circuit.SHA256Compress(b, outer, pad96(inner))
}

// checked returns the notary's inputs, and ANDs into ok their equality
// with the prover's copies.
func checked(b *circuit.Builder, ok circuit.Wire, notary, prover [][]circuit.Wire) circuit.Wire {
	for i := range notary {
		ok = b.AND(ok, b.Equal(notary[i], prover[i]))
	}
	return ok
}

// inputs declares n inputs of 256 bits.
func inputs(b *circuit.Builder, n int) [][]circuit.Wire {
	out := make([][]circuit.Wire, n)
	for i := range out {
		out[i] = b.Input(256)
	}
	return out
}

// mustBuild builds b or panics: the circuits here are fixed, so a failure
// is a bug caught by the first test.
func mustBuild(b *circuit.Builder) *circuit.Circuit {
	c, err := b.Build()
	if err != nil {
		panic(fmt.Sprintf("twoparty: building a key-schedule circuit: %v", err))
	}
	return c
}

// tls13Constants are the public values of the TLS 1.3 key schedule up to
// the ECDHE secret: the midstates of derived = Derive-Secret(early
// secret, "derived", "") with no PSK.
var tls13Constants = sync.OnceValues(func() (ipad, opad [32]byte) {
	zero := make([]byte, 32)
	m := hmac.New(sha256.New, zero)
	m.Write(zero)
	early := m.Sum(nil)
	empty := sha256.Sum256(nil)
	derived, err := mpctls.DeriveSecret(crypto256, early, "derived", empty[:])
	if err != nil {
		panic(err)
	}
	return keyMidstate(derived, 0x36), keyMidstate(derived, 0x5c)
})

// keyMidstate is H(key ⊕ pad) for an HMAC key of at most 64 bytes,
// computed in the clear.
func keyMidstate(key []byte, pad byte) [32]byte {
	var blk [64]byte
	copy(blk[:], key)
	for i := range blk {
		blk[i] ^= pad
	}
	h := sha256.New()
	h.Write(blk[:])
	st, _, err := circuit.Midstate(h)
	if err != nil {
		panic(err)
	}
	return st
}

// Circuits of the TLS 1.3 schedule (SHA-256 suites). Outputs are listed
// in the order of the output groups.
type circuits13 struct {
	// handshake: PMS → inner and outer midstates of the handshake secret.
	// HS = HMAC(derived, PMS) has a public key, so its own midstates are
	// constants.
	handshake *circuit.Circuit
	// hsTraffic: HS outer midstate and the inner hashes of CHTS, SHTS and
	// derived, the notary's and the prover's → CHTS ‖ check bit; SHTS ‖
	// inner midstate of derived; outer midstate of derived.
	hsTraffic *circuit.Circuit
	// master: derived's outer midstate and the inner hash of MS =
	// HMAC(derived, 0³²) → inner midstate of MS; outer midstate of MS.
	master *circuit.Circuit
	// app: MS outer midstate and the inner hashes of CATS and SATS →
	// CATS; inner midstate of SATS; SATS; outer midstate of SATS.
	app *circuit.Circuit
	// update: a server traffic secret's outer midstate and the inner hash
	// of its "traffic upd" expansion → the next secret's inner midstate;
	// the next secret; its outer midstate.
	update *circuit.Circuit
	// keys[keyLen]: a server traffic secret's outer midstate and the
	// inner hashes of "key" and "iv" → key ‖ iv.
	keys map[int]*circuit.Circuit
}

var tls13Circuits = sync.OnceValue(func() *circuits13 {
	ipad, opad := tls13Constants()
	c := &circuits13{keys: map[int]*circuit.Circuit{}}

	b := circuit.NewBuilder()
	pms := b.Input(256)
	inner := circuit.SHA256Compress(b, circuit.Const(ipad[:], stateBits), pad96(pms))
	hs := circuit.SHA256Compress(b, circuit.Const(opad[:], stateBits), pad96(inner))
	hi, ho := hmacPads(b, hs)
	b.Output(hi)
	b.Output(ho)
	c.handshake = mustBuild(b)

	b = circuit.NewBuilder()
	ho = b.Input(stateBits)
	nin, pin := inputs(b, 3), inputs(b, 3)
	ok := checked(b, circuit.One, nin, pin)
	chts := hmacOut(b, ho, nin[0])
	shts := hmacOut(b, ho, nin[1])
	derived := hmacOut(b, ho, nin[2])
	di, do := hmacPads(b, derived)
	b.Output(circuit.Concat(chts, []circuit.Wire{ok}))
	b.Output(circuit.Concat(shts, di))
	b.Output(do)
	c.hsTraffic = mustBuild(b)

	b = circuit.NewBuilder()
	do = b.Input(stateBits)
	ims := b.Input(256)
	ms := hmacOut(b, do, ims)
	mi, mo := hmacPads(b, ms)
	b.Output(mi)
	b.Output(mo)
	c.master = mustBuild(b)

	b = circuit.NewBuilder()
	mo = b.Input(stateBits)
	ica, isa := b.Input(256), b.Input(256)
	cats := hmacOut(b, mo, ica)
	sats := hmacOut(b, mo, isa)
	si, so := hmacPads(b, sats)
	b.Output(cats)
	b.Output(si)
	b.Output(sats)
	b.Output(so)
	c.app = mustBuild(b)

	b = circuit.NewBuilder()
	so = b.Input(stateBits)
	iu := b.Input(256)
	next := hmacOut(b, so, iu)
	ni, no := hmacPads(b, next)
	b.Output(ni)
	b.Output(next)
	b.Output(no)
	c.update = mustBuild(b)

	for _, keyLen := range []int{16, 32} {
		b = circuit.NewBuilder()
		so = b.Input(stateBits)
		ik, iiv := b.Input(256), b.Input(256)
		key := hmacOut(b, so, ik)[:8*keyLen]
		iv := hmacOut(b, so, iiv)[:96]
		b.Output(circuit.Concat(key, iv))
		c.keys[keyLen] = mustBuild(b)
	}
	return c
})

// Circuits of the TLS 1.2 PRF with SHA-256 (RFC 5246 §5, RFC 7627).
type circuits12 struct {
	// pms: PMS → its inner and outer midstates as an HMAC key.
	pms *circuit.Circuit
	// outer: an outer midstate and an inner hash, the notary's and the
	// prover's → check bit; the HMAC output.
	outer *circuit.Circuit
	// outer2: an outer midstate and two inner hashes, the notary's and
	// the prover's → check bit; both outputs.
	outer2 *circuit.Circuit
	// master: the PMS outer midstate, P_hash's first block and the inner
	// hash of its second → inner midstate of the 48-byte master secret;
	// its outer midstate.
	master *circuit.Circuit
	// keyBlock: MS outer midstate and the inner hashes of the key
	// expansion's A(2) and first block and of the client Finished's P(1),
	// the notary's and the prover's → client write key (16) ‖ check bit;
	// A(2) ‖ client verify_data (12 bytes); server write key (16).
	keyBlock *circuit.Circuit
	// keyBlock2: MS outer midstate and the inner hashes of the key
	// expansion's second block and of the server Finished's A(1), the
	// notary's and the prover's → client write IV (4) ‖ check bit; server
	// write IV (4); the server Finished's A(1).
	keyBlock2 *circuit.Circuit
	// serverFinished: MS outer midstate, the server write key and IV,
	// the inner hash of the server Finished's P(1), and the Finished
	// record's explicit nonce and first 16 bytes of ciphertext → one bit:
	// the record decrypts to the Finished message with the verify_data
	// the master secret gives.
	serverFinished *circuit.Circuit
}

var tls12Circuits = sync.OnceValue(func() *circuits12 {
	c := &circuits12{}
	b := circuit.NewBuilder()
	pms := b.Input(256)
	pi, po := hmacPads(b, pms)
	b.Output(pi)
	b.Output(po)
	c.pms = mustBuild(b)

	b = circuit.NewBuilder()
	st := b.Input(stateBits)
	nin, pin := inputs(b, 1), inputs(b, 1)
	b.Output([]circuit.Wire{checked(b, circuit.One, nin, pin)})
	b.Output(hmacOut(b, st, nin[0]))
	c.outer = mustBuild(b)

	b = circuit.NewBuilder()
	st = b.Input(stateBits)
	nin, pin = inputs(b, 2), inputs(b, 2)
	b.Output([]circuit.Wire{checked(b, circuit.One, nin, pin)})
	b.Output(hmacOut(b, st, nin[0]))
	b.Output(hmacOut(b, st, nin[1]))
	c.outer2 = mustBuild(b)

	b = circuit.NewBuilder()
	po = b.Input(stateBits)
	p1, ip2 := b.Input(256), b.Input(256)
	p2 := hmacOut(b, po, ip2)
	ms := circuit.Concat(p1, p2[:128])
	mi, mo := hmacPads(b, ms)
	b.Output(mi)
	b.Output(mo)
	c.master = mustBuild(b)

	b = circuit.NewBuilder()
	mo = b.Input(stateBits)
	nin, pin = inputs(b, 3), inputs(b, 3)
	ok := checked(b, circuit.One, nin, pin)
	a2 := hmacOut(b, mo, nin[0])
	kb1 := hmacOut(b, mo, nin[1])
	cvd := hmacOut(b, mo, nin[2])[:96]
	b.Output(circuit.Concat(kb1[:128], []circuit.Wire{ok}))
	b.Output(circuit.Concat(a2, cvd))
	b.Output(kb1[128:])
	c.keyBlock = mustBuild(b)

	b = circuit.NewBuilder()
	mo = b.Input(stateBits)
	nin, pin = inputs(b, 2), inputs(b, 2)
	ok = checked(b, circuit.One, nin, pin)
	kb2 := hmacOut(b, mo, nin[0])
	b.Output(circuit.Concat(kb2[:32], []circuit.Wire{ok}))
	b.Output(kb2[32:64])
	b.Output(hmacOut(b, mo, nin[1]))
	c.keyBlock2 = mustBuild(b)

	b = circuit.NewBuilder()
	mo = b.Input(stateBits)
	skey, siv := b.Input(128), b.Input(32)
	isf := b.Input(256)
	rec := b.Input(8 * 24) // explicit nonce ‖ the first 16 bytes of ciphertext
	svd := hmacOut(b, mo, isf)[:96]
	ctr := circuit.Concat(siv, rec[:64], circuit.Const([]byte{0, 0, 0, 2}, 32))
	ks := circuit.AES128(b, skey, ctr)
	want := circuit.Concat(circuit.Const([]byte{typeFinished, 0, 0, 12}, 32), svd)
	b.Output([]circuit.Wire{b.Equal(b.XORs(ks, rec[64:]), want)})
	c.serverFinished = mustBuild(b)
	return c
})

// SessionANDs returns the AND gates of the circuits an MPC-mode session of
// version calls through its first server key (TLS 1.3 with AES-128-GCM:
// the handshake and application secrets and epoch 0's key and IV; TLS
// 1.2: the master secret, the key block, both Finished values and the
// server Finished check). Each further TLS 1.3 epoch adds EpochANDs.
func SessionANDs(version uint16) int {
	if version == mpctls.VersionTLS13 {
		c := tls13Circuits()
		return c.handshake.ANDs() + c.hsTraffic.ANDs() + c.master.ANDs() + c.app.ANDs() + c.keys[16].ANDs()
	}
	c := tls12Circuits()
	return c.pms.ANDs() + c.outer.ANDs() + 2*c.outer2.ANDs() + c.master.ANDs() + c.keyBlock.ANDs() + c.keyBlock2.ANDs() + c.serverFinished.ANDs()
}

// EpochANDs returns the AND gates of one further TLS 1.3 server key epoch
// (a KeyUpdate and the new key and IV, AES-128-GCM).
func EpochANDs() int {
	c := tls13Circuits()
	return c.update.ANDs() + c.keys[16].ANDs()
}
