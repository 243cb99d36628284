package mpctls

import (
	"errors"
	"fmt"

	"golang.org/x/crypto/cryptobyte"
)

// Handshake message types of the TLS 1.2 client flight.
const typeClientKeyExchange = 16

// KeyExchange is what the plaintext start of a session says about its key
// exchange: what two parties computing the client's side of a session
// together (MPC mode, where the prover and the notary share the client's
// ECDHE secret) need before any secret of the session exists. It is read
// from the same records VerifyHandshake later checks, by the same
// parsers, and checks nothing VerifyHandshake does not check again.
type KeyExchange struct {
	Version     uint16 // negotiated: VersionTLS12 or VersionTLS13
	CipherSuite uint16 // negotiated suite, one of Suites
	// HelloRetry reports that the server sent a HelloRetryRequest; the
	// fields below are then those of the retry's group only.
	HelloRetry bool
	Group      uint16 // key exchange group the server chose
	// ClientShare is the client's public value for Group: its ClientHello
	// key_share entry (TLS 1.3) or its ClientKeyExchange point (TLS 1.2,
	// nil until the records hold the ClientKeyExchange).
	ClientShare []byte
	// ServerShare is the server's public value: its ServerHello key_share
	// (TLS 1.3) or its ServerKeyExchange point (TLS 1.2).
	ServerShare []byte
	// ExtendedMasterSecret reports, for TLS 1.2, that the client offered
	// and the server accepted the extended master secret (RFC 7627).
	ExtendedMasterSecret bool
	ClientRandom         [32]byte
	ServerRandom         [32]byte
	// Messages are the handshake messages in transcript order, headers
	// included: the ClientHello and ServerHello (TLS 1.3), or the
	// ClientHello, the server's flight through ServerHelloDone and, once
	// the records hold it, the ClientKeyExchange (TLS 1.2). Their
	// concatenation is what the transcript hash covers so far.
	Messages [][]byte
}

// ParseKeyExchange reads the key exchange of a session from its records
// (both directions, in arrival order or direction by direction). Records
// that end before the ServerHello (TLS 1.3) or the ServerHelloDone (TLS
// 1.2) give an error wrapping ErrTruncated, so a caller reading a live
// session can wait for more; a malformed or unsupported handshake (TLS
// below 1.2, a suite not in Suites, a pre-shared key, resumption) gives
// ErrHandshake or ErrUnsupported.
func ParseKeyExchange(records []Record) (*KeyExchange, error) {
	var cli, srv []Record
	var counts [3]uint64
	for _, r := range records {
		if err := r.check(); err != nil {
			return nil, err
		}
		if r.Seq != counts[r.Dir] {
			return nil, &RecordError{Dir: r.Dir, Seq: r.Seq, Reason: fmt.Sprintf("expected sequence number %d", counts[r.Dir]), Err: ErrSequence}
		}
		counts[r.Dir]++
		if r.Dir == ClientToServer {
			cli = append(cli, r)
		} else {
			srv = append(srv, r)
		}
	}
	cs := &hsStream{recs: cli, skipCCS: true}
	ss := &hsStream{recs: srv, skipCCS: true}
	chMsg, err := cs.expect(typeClientHello, "client hello")
	if err != nil {
		return nil, err
	}
	ch, err := parseClientHello(chMsg)
	if err != nil {
		return nil, err
	}
	shMsg, err := ss.expect(typeServerHello, "server hello")
	if err != nil {
		return nil, err
	}
	sh, err := parseServerHello(shMsg)
	if err != nil {
		return nil, err
	}
	if ch.psk || sh.psk {
		return nil, hsErr(ErrUnsupported, "hello", errors.New("pre-shared key / resumption offered"))
	}
	if !ch.offers(sh.suite) {
		return nil, hsErr(ErrHandshake, "server hello", fmt.Errorf("suite %#04x was not offered", sh.suite))
	}
	if !ch.offersVersion(sh.version) {
		return nil, hsErr(ErrHandshake, "server hello", fmt.Errorf("version %#04x was not offered", sh.version))
	}
	if _, err := suiteFor(sh.version, sh.suite); err != nil {
		return nil, hsErr(ErrUnsupported, "server hello", err)
	}
	kx := &KeyExchange{Version: sh.version, CipherSuite: sh.suite, HelloRetry: sh.isHRR, Group: sh.group}
	copy(kx.ClientRandom[:], ch.random)
	copy(kx.ServerRandom[:], sh.random)
	kx.Messages = [][]byte{chMsg, shMsg}
	if sh.isHRR {
		return kx, nil
	}
	if sh.version == VersionTLS13 {
		if len(sh.keyShare) == 0 {
			return nil, hsErr(ErrHandshake, "server hello", errors.New("no key share"))
		}
		kx.ServerShare = sh.keyShare
		for _, e := range ch.shares {
			if e.group == sh.group {
				kx.ClientShare = e.key
				break
			}
		}
		if kx.ClientShare == nil {
			return nil, hsErr(ErrHandshake, "server hello", fmt.Errorf("group %d has no client key share", sh.group))
		}
		return kx, nil
	}
	// TLS 1.2: the plaintext server flight, then the client's key exchange.
	if len(sh.sessionID) > 0 && string(sh.sessionID) == string(ch.sessionID) {
		return nil, hsErr(ErrUnsupported, "server hello", errors.New("session resumption"))
	}
	kx.ExtendedMasterSecret = ch.ems && sh.ems
	ss.skipCCS = false
	for {
		msg, err := ss.nextMsg("server hello done")
		if errors.Is(err, errCCS) {
			return nil, hsErr(ErrUnsupported, "server hello", errors.New("abbreviated handshake (session resumption)"))
		}
		if err != nil {
			return nil, err
		}
		kx.Messages = append(kx.Messages, msg)
		switch msg[0] {
		case typeCertificate, typeCertificateRequest:
			continue
		case typeServerKeyExchange:
			ske, err := parseServerKeyExchange(msg)
			if err != nil {
				return nil, err
			}
			kx.Group, kx.ServerShare = ske.group, ske.point
			continue
		case typeServerHelloDone:
		default:
			return nil, hsErr(ErrHandshake, "server flight", fmt.Errorf("unexpected handshake message %d", msg[0]))
		}
		break
	}
	if kx.ServerShare == nil {
		return nil, hsErr(ErrHandshake, "server flight", errors.New("no server key exchange"))
	}
	cs.skipCCS = false
	msg, err := cs.nextMsg("client key exchange")
	switch {
	case errors.Is(err, ErrTruncated):
		return kx, nil
	case err != nil:
		return nil, err
	case msg[0] != typeClientKeyExchange:
		return nil, hsErr(ErrUnsupported, "client key exchange", fmt.Errorf("handshake message %d (client certificates are not supported)", msg[0]))
	}
	s := cryptobyte.String(msg[4:])
	var point cryptobyte.String
	if !s.ReadUint8LengthPrefixed(&point) || !s.Empty() || len(point) == 0 {
		return nil, malformed("client key exchange")
	}
	kx.ClientShare = point
	kx.Messages = append(kx.Messages, msg)
	return kx, nil
}
