package twoparty

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/acds-project/acds/mpctls"
)

// Relay is the notary's view of the session it relays, as the notary's
// side of the protocol needs it.
type Relay interface {
	// Snapshot returns the records the relay keeps for the handshake
	// check (both directions, in arrival order, through the client's
	// first protected record), how many server records it has committed
	// (recorded in the transcript), whether the tunnel has ended in both
	// directions, and a channel closed at the next change.
	Snapshot() (handshake []mpctls.Record, server uint64, ended bool, changed <-chan struct{})
	// Commit signs a checkpoint (mpctls.Checkpoint) of every record
	// committed so far, for the server key epoch about to be revealed,
	// and returns it with its server record count. With cut it first ends
	// the server direction, so that no server record is committed after
	// the checkpoint, and waits until every record admitted before is.
	Commit(epoch uint32, cut bool) (checkpoint []byte, server uint64, err error)
	// Target returns the name the session is for (the CONNECT host) and
	// its start, the time the server's certificate must be valid at. It
	// is called once the handshake records are in.
	Target() (serverName string, start time.Time)
}

// NotaryConfig configures the notary's side of a session.
type NotaryConfig struct {
	// Roots verify the server's certificate chain. Required.
	Roots *x509.CertPool
}

// Outcome is what the notary's side established about a session that
// ended well: what its statement needs.
type Outcome struct {
	// Handshake is the server identity check the notary ran, with the
	// handshake secret the two-party computation gave it (TLS 1.3), or
	// on the plaintext flight and with the server Finished checked in
	// two-party computation (TLS 1.2).
	Handshake *mpctls.Handshake
	// Reveals are the server record counts committed when each epoch's
	// keys were revealed, in epoch order (mpctls.Statement.Reveals).
	Reveals []uint64
}

// Notary is the notary's side of an MPC-mode session: it follows the
// prover's requests, checks each against the records it relays, makes
// its half of the two-party computation, and reveals a server epoch's
// keys only after the records that epoch protects are committed.
type Notary struct {
	e     engine
	m     Messages
	relay Relay
	cfg   NotaryConfig

	share   []byte
	kx      *mpctls.KeyExchange
	ks13    *schedule13
	ks12    *schedule12
	shts    []byte
	hs      *mpctls.Handshake
	reveals []uint64
	ready   bool // the handshake is done and checked: reveals may follow
	cut     bool // a reveal ended the server direction: nothing can follow it
	done    bool
}

// newNotary makes the notary's side over its half of a two-party session.
func newNotary(e engine, m Messages, relay Relay, cfg NotaryConfig) *Notary {
	return &Notary{e: e, m: m, relay: relay, cfg: cfg}
}

// Serve runs the session until the prover's finish request has been
// served (the outcome) or something fails. A refusal is sent to the
// prover before Serve returns it.
func (n *Notary) Serve(ctx context.Context) (*Outcome, error) {
	if n.cfg.Roots == nil {
		return nil, errors.New("twoparty: notary side without roots")
	}
	share, err := n.e.KeyShare(ctx)
	if err != nil {
		return nil, err
	}
	n.share = share
	for !n.done {
		b, err := n.m.Recv(ctx, maxMessage)
		if err != nil {
			return nil, err
		}
		r, err := parseRequest(b)
		if err != nil {
			return nil, err
		}
		if err := n.serve(ctx, r); err != nil {
			return nil, err
		}
	}
	return &Outcome{Handshake: n.hs, Reveals: n.reveals}, nil
}

// refuse tells the prover why and returns the error.
func (n *Notary) refuse(ctx context.Context, err error) error {
	n.m.Send(ctx, answer{reason: err.Error()}.marshal())
	return err
}

func (n *Notary) ok(ctx context.Context, checkpoint []byte) error {
	return n.m.Send(ctx, answer{ok: true, checkpoint: checkpoint}.marshal())
}

// wait blocks until pred holds on the relay's snapshot or ctx is done.
func (n *Notary) wait(ctx context.Context, pred func(hs []mpctls.Record, server uint64, ended bool) bool) error {
	for {
		hs, server, ended, changed := n.relay.Snapshot()
		if pred(hs, server, ended) {
			return nil
		}
		if ended {
			return fmt.Errorf("%w: the tunnel ended first", mpctls.ErrTruncated)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// keyExchange waits until the records hold the key exchange (through the
// ClientKeyExchange, when clientShare is set) and checks that MPC mode
// can serve it with the key share the engine gave.
func (n *Notary) keyExchange(ctx context.Context, version uint16) (*mpctls.KeyExchange, error) {
	var kx *mpctls.KeyExchange
	var perr error
	err := n.wait(ctx, func(hs []mpctls.Record, _ uint64, _ bool) bool {
		kx, perr = mpctls.ParseKeyExchange(hs)
		if errors.Is(perr, mpctls.ErrTruncated) {
			return false
		}
		return perr != nil || version != mpctls.VersionTLS12 || kx.Version != mpctls.VersionTLS12 || kx.ClientShare != nil
	})
	if err != nil {
		return nil, err
	}
	if perr != nil {
		return nil, perr
	}
	switch {
	case kx.HelloRetry:
		return nil, fmt.Errorf("%w: the server asks for group %d", ErrUnsupported, kx.Group)
	case kx.Version != version:
		return nil, fmt.Errorf("%w: the prover asked for version %#04x, the server chose %#04x", ErrProtocol, version, kx.Version)
	case kx.Group != groupP256 || !Supported(kx.Version, kx.CipherSuite):
		return nil, fmt.Errorf("%w: group %d, suite %#04x", ErrUnsupported, kx.Group, kx.CipherSuite)
	case kx.Version == mpctls.VersionTLS12 && !kx.ExtendedMasterSecret:
		return nil, fmt.Errorf("%w: tls 1.2 without the extended master secret", ErrUnsupported)
	case !bytes.Equal(kx.ClientShare, n.share):
		return nil, fmt.Errorf("%w: the client's key share is not the two parties' share", ErrProtocol)
	}
	return kx, nil
}

func transcriptHash(msgs ...[]byte) []byte {
	h := sha256.New()
	for _, m := range msgs {
		h.Write(m)
	}
	return h.Sum(nil)
}

func (n *Notary) serve(ctx context.Context, r request) error {
	switch {
	case r.kind == reqServerHello && n.kx == nil:
		kx, err := n.keyExchange(ctx, mpctls.VersionTLS13)
		if err != nil {
			return n.refuse(ctx, err)
		}
		n.kx = kx
		suite, err := mpctls.SuiteByID(kx.CipherSuite)
		if err != nil {
			return n.refuse(ctx, err)
		}
		if err := n.ok(ctx, nil); err != nil {
			return err
		}
		pms, err := n.e.ECDH(ctx, kx.ServerShare)
		if err != nil {
			return err
		}
		n.ks13 = newSchedule13(n.e, notary, suite.KeyLen)
		if _, n.shts, err = n.ks13.handshake(ctx, pms, transcriptHash(kx.Messages...)); err != nil {
			return err
		}
		return n.ks13.master(ctx)

	case r.kind == reqServerFlight && n.ks13 != nil && n.hs == nil:
		var hs *mpctls.Handshake
		var verr error
		name, start := n.relay.Target()
		opts := mpctls.HandshakeOptions{Roots: n.cfg.Roots, SNI: name, Now: start}
		err := n.wait(ctx, func(recs []mpctls.Record, _ uint64, _ bool) bool {
			hs, verr = mpctls.VerifyHandshake(recs, mpctls.Disclosure{ServerHandshakeTrafficSecret: n.shts}, opts)
			return !errors.Is(verr, mpctls.ErrTruncated)
		})
		if err == nil {
			err = verr
		}
		if err != nil {
			return n.refuse(ctx, err)
		}
		n.hs = hs
		if err := n.ok(ctx, nil); err != nil {
			return err
		}
		if _, err := n.ks13.application(ctx, hs.TranscriptHash); err != nil {
			return err
		}
		if err := n.ks13.epochKeys(ctx); err != nil {
			return err
		}
		n.ready = true
		return nil

	case r.kind == reqClientKeyExchange && n.kx == nil:
		kx, err := n.keyExchange(ctx, mpctls.VersionTLS12)
		if err != nil {
			return n.refuse(ctx, err)
		}
		n.kx = kx
		if err := n.ok(ctx, nil); err != nil {
			return err
		}
		pms, err := n.e.ECDH(ctx, kx.ServerShare)
		if err != nil {
			return err
		}
		n.ks12 = newSchedule12(n.e, notary)
		sessionHash := transcriptHash(kx.Messages...)
		if err := n.ks12.master(ctx, pms, sessionHash); err != nil {
			return err
		}
		_, cvd, err := n.ks12.keys(ctx, kx.ClientRandom, kx.ServerRandom, sessionHash)
		if err != nil {
			return err
		}
		fin := append([]byte{typeFinished, 0, 0, 12}, cvd...)
		_, err = n.ks12.keys2(ctx, transcriptHash(append(kx.Messages, fin)...))
		return err

	case r.kind == reqServerFinished && n.ks12 != nil && n.hs == nil:
		var hs *mpctls.Handshake
		var recs []mpctls.Record
		var verr error
		name, start := n.relay.Target()
		opts := mpctls.HandshakeOptions{Roots: n.cfg.Roots, SNI: name, Now: start}
		err := n.wait(ctx, func(all []mpctls.Record, _ uint64, _ bool) bool {
			hs, verr = mpctls.VerifyHandshake(all, mpctls.Disclosure{}, opts)
			recs = all
			return !errors.Is(verr, mpctls.ErrTruncated) && (verr != nil || serverRecord(all, hs.ServerProtectedFrom) != nil)
		})
		if err == nil {
			err = verr
		}
		if err != nil {
			return n.refuse(ctx, err)
		}
		fin := serverRecord(recs, hs.ServerProtectedFrom)
		if fin.Type != mpctls.RecordHandshake || len(fin.Raw) != mpctls.HeaderLen+8+16+16 {
			return n.refuse(ctx, fmt.Errorf("%w: the server's first protected record is not a finished message", mpctls.ErrHandshake))
		}
		if err := n.ok(ctx, nil); err != nil {
			return err
		}
		ok, err := n.ks12.serverFinished(ctx, fin.Raw[mpctls.HeaderLen:mpctls.HeaderLen+24])
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: the server finished does not verify under the two parties' keys", mpctls.ErrFinished)
		}
		n.hs = hs
		n.ready = true
		return nil

	case r.kind == reqNextEpoch && n.ready && n.ks13 != nil && !n.cut:
		if err := n.ok(ctx, nil); err != nil {
			return err
		}
		return n.ks13.nextEpoch(ctx)

	case r.kind == reqReveal && n.ready && int(r.epoch) == len(n.reveals) && !n.cut:
		if len(n.reveals) >= mpctls.MaxReveals {
			return n.refuse(ctx, fmt.Errorf("%w: more than %d reveals in one session", ErrProtocol, mpctls.MaxReveals))
		}
		if n.ks13 != nil && int(r.epoch) >= len(n.ks13.keys) || n.ks12 != nil && (r.epoch != 0 || !r.end) {
			return n.refuse(ctx, fmt.Errorf("%w: epoch %d has no keys to reveal", ErrProtocol, r.epoch))
		}
		if !r.end {
			// The record that ends the epoch must be committed first.
			if err := n.wait(ctx, func(_ []mpctls.Record, server uint64, _ bool) bool { return server > r.after }); err != nil {
				return n.refuse(ctx, fmt.Errorf("server record %d: %w", r.after, err))
			}
		}
		cp, server, err := n.relay.Commit(r.epoch, r.end)
		if err != nil {
			return n.refuse(ctx, err)
		}
		n.reveals = append(n.reveals, server)
		n.cut = r.end
		if err := n.ok(ctx, cp); err != nil {
			return err
		}
		if n.ks13 != nil {
			_, err = n.ks13.revealEpoch(ctx, int(r.epoch))
		} else {
			_, err = n.ks12.revealKey(ctx)
		}
		return err

	case r.kind == reqFinish && n.ready:
		// Nothing more can be recorded once the tunnel has ended: the
		// server secret may be revealed, then the computation proved.
		if err := n.wait(ctx, func(_ []mpctls.Record, _ uint64, ended bool) bool { return ended }); err != nil && !errors.Is(err, mpctls.ErrTruncated) {
			return n.refuse(ctx, err)
		}
		if err := n.ok(ctx, nil); err != nil {
			return err
		}
		var err error
		if n.ks13 != nil {
			_, err = n.ks13.revealSecret(ctx)
		} else if len(n.reveals) == 0 {
			_, err = n.ks12.revealKey(ctx)
		}
		if err != nil {
			return err
		}
		if err := n.e.Finalize(ctx); err != nil {
			return err
		}
		n.done = true
		return nil
	}
	return n.refuse(ctx, fmt.Errorf("%w: request %d out of turn", ErrProtocol, r.kind))
}

// serverRecord returns the server record with sequence number seq among
// recs, or nil.
func serverRecord(recs []mpctls.Record, seq uint64) *mpctls.Record {
	for i := range recs {
		if recs[i].Dir == mpctls.ServerToClient && recs[i].Seq == seq {
			return &recs[i]
		}
	}
	return nil
}
