package twoparty

import (
	"context"
	"crypto"
	"crypto/sha256"
	"fmt"

	"github.com/acds-project/acds/mpctls"
	"github.com/acds-project/acds/mpctls/mpc/circuit"
)

const (
	crypto256    = crypto.SHA256
	typeFinished = 20
)

// innerHash is the inner hash of an HMAC-SHA256 whose key's inner
// midstate H(k⊕ipad) is known: H(k⊕ipad ‖ msg), computed without the key.
func innerHash(ipad [32]byte, msg ...[]byte) ([]byte, error) {
	h, err := circuit.ResumeSHA256(ipad, 64)
	if err != nil {
		return nil, err
	}
	for _, m := range msg {
		h.Write(m)
	}
	return h.Sum(nil), nil
}

// expandInner is the inner hash of HKDF-Expand-Label(secret, label,
// context, length)'s first block, T(1) = HMAC(secret, info ‖ 0x01), from
// the secret's inner midstate.
func expandInner(ipad [32]byte, label string, context []byte, length int) ([]byte, error) {
	info, err := mpctls.HKDFLabel(label, context, length)
	if err != nil {
		return nil, err
	}
	return innerHash(ipad, info, []byte{1})
}

func state32(b []byte) ([32]byte, error) {
	var s [32]byte
	if len(b) != 32 {
		return s, fmt.Errorf("%w: a midstate of %d bytes", ErrProtocol, len(b))
	}
	copy(s[:], b)
	return s, nil
}

// checkedInputs declares and assigns, for each value (an inner hash both
// sides compute), the notary's copy and then the prover's, for a circuit
// that checks they agree.
func checkedInputs(ctx context.Context, e engine, side party, vals ...[]byte) ([]value, error) {
	n, err := notaryInputs(ctx, e, side, vals...)
	if err != nil {
		return nil, err
	}
	p := make([]value, len(vals))
	for i, v := range vals {
		if p[i], err = e.Input(prover, 256); err != nil {
			return nil, err
		}
		var data []byte
		if side == prover {
			data = v
		}
		if err := e.Assign(ctx, p[i], data); err != nil {
			return nil, err
		}
	}
	return append(n, p...), nil
}

// openChecked opens to the prover an output whose last bit is a circuit's
// check bit and returns the rest (nil on the notary). A cleared bit — the
// notary's inputs differ from the prover's — stops the prover here, before
// anything is opened to the notary.
func openChecked(ctx context.Context, e engine, side party, v value) ([]byte, error) {
	b, err := e.Open(ctx, v, toProver)
	if err != nil || side != prover {
		return nil, err
	}
	if len(b) == 0 || b[len(b)-1] != 0x80 {
		return nil, fmt.Errorf("%w: the notary's inputs to the key schedule differ from the prover's", ErrProtocol)
	}
	return b[:len(b)-1], nil
}

// notaryInputs declares one notary input per value and assigns them: the
// notary passes the bytes (each 32), the prover nil.
func notaryInputs(ctx context.Context, e engine, side party, vals ...[]byte) ([]value, error) {
	out := make([]value, len(vals))
	for i, v := range vals {
		var err error
		if out[i], err = e.Input(notary, 256); err != nil {
			return nil, err
		}
		var data []byte
		if side == notary {
			data = v
		}
		if err := e.Assign(ctx, out[i], data); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// schedule13 is one side's run of the TLS 1.3 key schedule (SHA-256
// suites) in two-party computation. Both sides call the same methods in
// the same order; the notary passes the transcript hashes (it computes
// them from the records it holds), the prover nil. What each party learns
// is in docs/mpc-tls.md ("The key-schedule split").
type schedule13 struct {
	e      engine
	side   party
	c      *circuits13
	keyLen int

	hsOuter, derivedOuter, msOuter value
	derivedInner, msInner          [32]byte
	sats                           value    // server_application_traffic_secret_0
	serverOuter                    value    // outer midstate of the current server secret
	serverInner                    [32]byte // its inner midstate
	keys                           []value  // key ‖ iv of each server epoch derived so far
}

func newSchedule13(e engine, side party, keyLen int) *schedule13 {
	return &schedule13{e: e, side: side, c: tls13Circuits(), keyLen: keyLen}
}

// handshake derives the handshake traffic secrets from the ECDHE secret:
// CHTS to the prover (nil on the notary), SHTS to both. hellos is
// Hash(ClientHello ‖ ServerHello), which each side computes from the
// records it holds.
func (k *schedule13) handshake(ctx context.Context, pms value, hellos []byte) (chts, shts []byte, err error) {
	out, err := k.e.Call(ctx, k.c.handshake, pms)
	if err != nil {
		return nil, nil, err
	}
	hi, err := k.e.Open(ctx, out[0], toBoth)
	if err != nil {
		return nil, nil, err
	}
	k.hsOuter = out[1]
	hsInner, err := state32(hi)
	if err != nil {
		return nil, nil, err
	}
	empty := sha256.Sum256(nil)
	ic, err := expandInner(hsInner, "c hs traffic", hellos, 32)
	if err != nil {
		return nil, nil, err
	}
	is, err := expandInner(hsInner, "s hs traffic", hellos, 32)
	if err != nil {
		return nil, nil, err
	}
	id, err := expandInner(hsInner, "derived", empty[:], 32)
	if err != nil {
		return nil, nil, err
	}
	in, err := checkedInputs(ctx, k.e, k.side, ic, is, id)
	if err != nil {
		return nil, nil, err
	}
	out, err = k.e.Call(ctx, k.c.hsTraffic, append([]value{k.hsOuter}, in...)...)
	if err != nil {
		return nil, nil, err
	}
	if chts, err = openChecked(ctx, k.e, k.side, out[0]); err != nil {
		return nil, nil, err
	}
	sd, err := k.e.Open(ctx, out[1], toBoth)
	if err != nil {
		return nil, nil, err
	}
	if len(sd) != 64 {
		return nil, nil, fmt.Errorf("%w: opened %d bytes of SHTS and a midstate", ErrProtocol, len(sd))
	}
	k.derivedInner, _ = state32(sd[32:])
	k.derivedOuter = out[2]
	return chts, sd[:32], nil
}

// master derives the master secret, kept in the engine but for its inner
// midstate.
func (k *schedule13) master(ctx context.Context) error {
	var ims []byte
	if k.side == notary {
		var err error
		if ims, err = innerHash(k.derivedInner, make([]byte, 32)); err != nil {
			return err
		}
	}
	in, err := notaryInputs(ctx, k.e, k.side, ims)
	if err != nil {
		return err
	}
	out, err := k.e.Call(ctx, k.c.master, k.derivedOuter, in[0])
	if err != nil {
		return err
	}
	mi, err := k.e.Open(ctx, out[0], toBoth)
	if err != nil {
		return err
	}
	if k.msInner, err = state32(mi); err != nil {
		return err
	}
	k.msOuter = out[1]
	return nil
}

// application derives CATS, opened to the prover (nil on the notary), and
// SATS₀, which stays in the engine. transcript is Hash(ClientHello …
// server Finished), the notary's only.
func (k *schedule13) application(ctx context.Context, transcript []byte) (cats []byte, err error) {
	var ica, isa []byte
	if k.side == notary {
		if ica, err = expandInner(k.msInner, "c ap traffic", transcript, 32); err != nil {
			return nil, err
		}
		if isa, err = expandInner(k.msInner, "s ap traffic", transcript, 32); err != nil {
			return nil, err
		}
	}
	in, err := notaryInputs(ctx, k.e, k.side, ica, isa)
	if err != nil {
		return nil, err
	}
	out, err := k.e.Call(ctx, k.c.app, k.msOuter, in[0], in[1])
	if err != nil {
		return nil, err
	}
	if cats, err = k.e.Open(ctx, out[0], toProver); err != nil {
		return nil, err
	}
	si, err := k.e.Open(ctx, out[1], toBoth)
	if err != nil {
		return nil, err
	}
	if k.serverInner, err = state32(si); err != nil {
		return nil, err
	}
	k.sats, k.serverOuter = out[2], out[3]
	return cats, nil
}

// epochKeys derives the key and IV of the current server secret (the
// next epoch without keys), kept in the engine.
func (k *schedule13) epochKeys(ctx context.Context) error {
	var ik, iiv []byte
	if k.side == notary {
		var err error
		if ik, err = expandInner(k.serverInner, "key", nil, k.keyLen); err != nil {
			return err
		}
		if iiv, err = expandInner(k.serverInner, "iv", nil, 12); err != nil {
			return err
		}
	}
	in, err := notaryInputs(ctx, k.e, k.side, ik, iiv)
	if err != nil {
		return err
	}
	out, err := k.e.Call(ctx, k.c.keys[k.keyLen], k.serverOuter, in[0], in[1])
	if err != nil {
		return err
	}
	k.keys = append(k.keys, out[0])
	return nil
}

// update moves the current server secret one KeyUpdate on:
// application_traffic_secret_N+1 = HKDF-Expand-Label(secret_N, "traffic
// upd", "", 32), kept in the engine.
func (k *schedule13) update(ctx context.Context) error {
	var iu []byte
	if k.side == notary {
		var err error
		if iu, err = expandInner(k.serverInner, "traffic upd", nil, 32); err != nil {
			return err
		}
	}
	in, err := notaryInputs(ctx, k.e, k.side, iu)
	if err != nil {
		return err
	}
	out, err := k.e.Call(ctx, k.c.update, k.serverOuter, in[0])
	if err != nil {
		return err
	}
	ni, err := k.e.Open(ctx, out[0], toBoth)
	if err != nil {
		return err
	}
	if k.serverInner, err = state32(ni); err != nil {
		return err
	}
	k.serverOuter = out[2]
	return nil
}

// nextEpoch derives the keys of server epoch len(k.keys): for epoch 0
// from SATS₀, for a later one after a KeyUpdate.
func (k *schedule13) nextEpoch(ctx context.Context) error {
	if len(k.keys) > 0 {
		if err := k.update(ctx); err != nil {
			return err
		}
	}
	return k.epochKeys(ctx)
}

// revealEpoch opens the key and IV of server epoch i to the prover (nil
// on the notary).
func (k *schedule13) revealEpoch(ctx context.Context, i int) ([]byte, error) {
	if i >= len(k.keys) {
		return nil, fmt.Errorf("%w: epoch %d has no keys yet", ErrProtocol, i)
	}
	return k.e.Open(ctx, k.keys[i], toProver)
}

// revealSecret opens SATS₀ to the prover, once nothing more can be
// recorded.
func (k *schedule13) revealSecret(ctx context.Context) ([]byte, error) {
	return k.e.Open(ctx, k.sats, toProver)
}

// TLS 1.2 PRF labels.
const (
	labelEMS            = "extended master secret"
	labelKeyExpansion   = "key expansion"
	labelClientFinished = "client finished"
	labelServerFinished = "server finished"
)

// schedule12 is one side's run of the TLS 1.2 PRF (SHA-256, extended
// master secret, AES-128-GCM) in two-party computation, as schedule13.
type schedule12 struct {
	e    engine
	side party
	c    *circuits12

	pmsOuter, msOuter value
	pmsInner, msInner [32]byte
	p1                value
	serverKey         value
	serverIV          value
	keyA2             []byte // A(2) of the key expansion
	keySeed           []byte
	serverA1          []byte // A(1) of the server Finished
	serverSeed        []byte
}

func newSchedule12(e engine, side party) *schedule12 {
	return &schedule12{e: e, side: side, c: tls12Circuits()}
}

// open32 opens v to both and returns it as a midstate.
func open32(ctx context.Context, e engine, v value) ([32]byte, error) {
	b, err := e.Open(ctx, v, toBoth)
	if err != nil {
		return [32]byte{}, err
	}
	return state32(b)
}

// outer runs the outer circuit (one HMAC output from a key's outer
// midstate) with a checked inner hash and opens the output to both.
func (k *schedule12) outer(ctx context.Context, st value, inner []byte) ([]byte, error) {
	in, err := checkedInputs(ctx, k.e, k.side, inner)
	if err != nil {
		return nil, err
	}
	out, err := k.e.Call(ctx, k.c.outer, append([]value{st}, in...)...)
	if err != nil {
		return nil, err
	}
	if _, err := openChecked(ctx, k.e, k.side, out[0]); err != nil {
		return nil, err
	}
	return k.e.Open(ctx, out[1], toBoth)
}

// outer2 is outer for two HMAC outputs of the same key; the second is
// opened to both only with open2, and returned as a value either way.
func (k *schedule12) outer2(ctx context.Context, st value, inner1, inner2 []byte, open2 bool) ([]byte, []byte, value, error) {
	in, err := checkedInputs(ctx, k.e, k.side, inner1, inner2)
	if err != nil {
		return nil, nil, nil, err
	}
	out, err := k.e.Call(ctx, k.c.outer2, append([]value{st}, in...)...)
	if err != nil {
		return nil, nil, nil, err
	}
	if _, err := openChecked(ctx, k.e, k.side, out[0]); err != nil {
		return nil, nil, nil, err
	}
	o1, err := k.e.Open(ctx, out[1], toBoth)
	if err != nil {
		return nil, nil, nil, err
	}
	var o2 []byte
	if open2 {
		if o2, err = k.e.Open(ctx, out[2], toBoth); err != nil {
			return nil, nil, nil, err
		}
	}
	return o1, o2, out[2], nil
}

// master derives the extended master secret from the ECDHE secret.
// sessionHash is Hash(ClientHello … ClientKeyExchange), which each side
// computes from the records it holds.
func (k *schedule12) master(ctx context.Context, pms value, sessionHash []byte) error {
	out, err := k.e.Call(ctx, k.c.pms, pms)
	if err != nil {
		return err
	}
	if k.pmsInner, err = open32(ctx, k.e, out[0]); err != nil {
		return err
	}
	k.pmsOuter = out[1]
	seed := append([]byte(labelEMS), sessionHash...)
	ia1, err := innerHash(k.pmsInner, seed)
	if err != nil {
		return err
	}
	a1, err := k.outer(ctx, k.pmsOuter, ia1)
	if err != nil {
		return err
	}
	ia2, err := innerHash(k.pmsInner, a1)
	if err != nil {
		return err
	}
	ip1, err := innerHash(k.pmsInner, a1, seed)
	if err != nil {
		return err
	}
	a2, _, p1, err := k.outer2(ctx, k.pmsOuter, ia2, ip1, false)
	if err != nil {
		return err
	}
	k.p1 = p1
	var ip2 []byte
	if k.side == notary {
		if ip2, err = innerHash(k.pmsInner, a2, seed); err != nil {
			return err
		}
	}
	in, err := notaryInputs(ctx, k.e, k.side, ip2)
	if err != nil {
		return err
	}
	out, err = k.e.Call(ctx, k.c.master, k.pmsOuter, k.p1, in[0])
	if err != nil {
		return err
	}
	if k.msInner, err = open32(ctx, k.e, out[0]); err != nil {
		return err
	}
	k.msOuter = out[1]
	return nil
}

// keys derives the key block's client half, opened to the prover (nil on
// the notary), the server half, kept, and the client Finished's
// verify_data, opened to both. handshakeHash is Hash(ClientHello …
// ClientKeyExchange).
func (k *schedule12) keys(ctx context.Context, clientRandom, serverRandom [32]byte, handshakeHash []byte) (clientKey, clientVerify []byte, err error) {
	k.keySeed = append(append([]byte(labelKeyExpansion), serverRandom[:]...), clientRandom[:]...)
	cseed := append([]byte(labelClientFinished), handshakeHash...)
	ika1, err := innerHash(k.msInner, k.keySeed)
	if err != nil {
		return nil, nil, err
	}
	ica1, err := innerHash(k.msInner, cseed)
	if err != nil {
		return nil, nil, err
	}
	ka1, ca1, _, err := k.outer2(ctx, k.msOuter, ika1, ica1, true)
	if err != nil {
		return nil, nil, err
	}
	ika2, err := innerHash(k.msInner, ka1)
	if err != nil {
		return nil, nil, err
	}
	ikb1, err := innerHash(k.msInner, ka1, k.keySeed)
	if err != nil {
		return nil, nil, err
	}
	icf, err := innerHash(k.msInner, ca1, cseed)
	if err != nil {
		return nil, nil, err
	}
	in, err := checkedInputs(ctx, k.e, k.side, ika2, ikb1, icf)
	if err != nil {
		return nil, nil, err
	}
	out, err := k.e.Call(ctx, k.c.keyBlock, append([]value{k.msOuter}, in...)...)
	if err != nil {
		return nil, nil, err
	}
	if clientKey, err = openChecked(ctx, k.e, k.side, out[0]); err != nil {
		return nil, nil, err
	}
	av, err := k.e.Open(ctx, out[1], toBoth)
	if err != nil {
		return nil, nil, err
	}
	if len(av) != 44 {
		return nil, nil, fmt.Errorf("%w: opened %d bytes of A(2) and verify_data", ErrProtocol, len(av))
	}
	k.keyA2 = av[:32]
	k.serverKey = out[2]
	return clientKey, av[32:], nil
}

// keys2 derives the rest of the key block — the client write IV, opened to
// the prover, and the server write IV, kept — and A(1) of the server
// Finished. finishedHash is Hash(ClientHello … client Finished).
func (k *schedule12) keys2(ctx context.Context, finishedHash []byte) (clientIV []byte, err error) {
	k.serverSeed = append([]byte(labelServerFinished), finishedHash...)
	ikb2, err := innerHash(k.msInner, k.keyA2, k.keySeed)
	if err != nil {
		return nil, err
	}
	isa1, err := innerHash(k.msInner, k.serverSeed)
	if err != nil {
		return nil, err
	}
	in, err := checkedInputs(ctx, k.e, k.side, ikb2, isa1)
	if err != nil {
		return nil, err
	}
	out, err := k.e.Call(ctx, k.c.keyBlock2, append([]value{k.msOuter}, in...)...)
	if err != nil {
		return nil, err
	}
	if clientIV, err = openChecked(ctx, k.e, k.side, out[0]); err != nil {
		return nil, err
	}
	k.serverIV = out[1]
	if k.serverA1, err = k.e.Open(ctx, out[2], toBoth); err != nil {
		return nil, err
	}
	return clientIV, nil
}

// serverFinished checks in two-party computation that the server's
// Finished record — rec, the first 24 bytes of its fragment (explicit
// nonce and the encrypted message), the notary's only — decrypts under
// the server key to the Finished the master secret gives. Both learn the
// result.
func (k *schedule12) serverFinished(ctx context.Context, rec []byte) (bool, error) {
	var isf []byte
	if k.side == notary {
		var err error
		if isf, err = innerHash(k.msInner, k.serverA1, k.serverSeed); err != nil {
			return false, err
		}
		if len(rec) != 24 {
			return false, fmt.Errorf("%w: server finished record of %d bytes", ErrProtocol, len(rec))
		}
	}
	in, err := notaryInputs(ctx, k.e, k.side, isf)
	if err != nil {
		return false, err
	}
	r, err := k.e.Input(notary, 8*24)
	if err != nil {
		return false, err
	}
	var data []byte
	if k.side == notary {
		data = rec
	}
	if err := k.e.Assign(ctx, r, data); err != nil {
		return false, err
	}
	out, err := k.e.Call(ctx, k.c.serverFinished, k.msOuter, k.serverKey, k.serverIV, in[0], r)
	if err != nil {
		return false, err
	}
	ok, err := k.e.Open(ctx, out[0], toBoth)
	if err != nil {
		return false, err
	}
	return len(ok) == 1 && ok[0] == 0x80, nil
}

// revealKey opens the server write key and IV to the prover (nil on the
// notary).
func (k *schedule12) revealKey(ctx context.Context) ([]byte, error) {
	key, err := k.e.Open(ctx, k.serverKey, toProver)
	if err != nil {
		return nil, err
	}
	iv, err := k.e.Open(ctx, k.serverIV, toProver)
	if err != nil {
		return nil, err
	}
	if k.side == notary {
		return nil, nil
	}
	return append(key, iv...), nil
}
