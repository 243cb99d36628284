package mpctls

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/cryptobyte"
)

// Handshake message types (RFC 8446 §4, RFC 5246 §7.4).
const (
	typeClientHello        = 1
	typeServerHello        = 2
	typeNewSessionTicket   = 4
	typeEncryptedExt       = 8
	typeCertificate        = 11
	typeServerKeyExchange  = 12
	typeCertificateRequest = 13
	typeServerHelloDone    = 14
	typeCertificateVerify  = 15
	typeFinished           = 20
	typeMessageHash        = 254
)

// Extension code points.
const (
	extServerName        = 0
	extALPN              = 16
	extExtendedMaster    = 23
	extPreSharedKey      = 41
	extEarlyData         = 42
	extSupportedVersions = 43
	extKeyShare          = 51
)

// maxHandshakeMessage bounds one handshake message (a certificate chain
// fits comfortably).
const maxHandshakeMessage = 1 << 18

// helloRetryRandom is the ServerHello.random that marks a
// HelloRetryRequest: SHA-256("HelloRetryRequest") (RFC 8446 §4.1.3).
var helloRetryRandom = sha256.Sum256([]byte("HelloRetryRequest"))

// Disclosure is what the prover reveals to the notary after the session so
// that the notary can check the server's identity. It never contains
// client-direction keys.
type Disclosure struct {
	// ServerHandshakeTrafficSecret is the TLS 1.3
	// server_handshake_traffic_secret. It decrypts only the server's
	// handshake flight (EncryptedExtensions … Finished), not application
	// data. Empty for TLS 1.2, whose certificate and ServerKeyExchange are
	// in the clear.
	ServerHandshakeTrafficSecret []byte
}

// HandshakeOptions configure VerifyHandshake. Both Roots and Now are
// required: the zero value is refused rather than silently falling back to
// the system roots or the wall clock.
type HandshakeOptions struct {
	// Roots are the trust anchors for the server certificate. Required.
	Roots *x509.CertPool
	// SNI is the server name the session was for (the CONNECT host). The
	// ClientHello's server_name must equal it, and the certificate must be
	// valid for it. Empty means: take the name from the ClientHello (which
	// must then carry one).
	SNI string
	// Now is the session time at which the certificate must be valid.
	// Required.
	Now time.Time
}

// Handshake is what VerifyHandshake established about a session.
type Handshake struct {
	Version      uint16   // VersionTLS12 or VersionTLS13
	CipherSuite  uint16   // negotiated AEAD suite
	SNI          string   // verified server name
	ClientRandom [32]byte // ClientHello.random (of the first ClientHello)
	ServerRandom [32]byte // ServerHello.random (of the real ServerHello)
	HelloRetry   bool     // the server sent a HelloRetryRequest
	Group        uint16   // key exchange group
	// SignatureScheme is the algorithm of the CertificateVerify (TLS 1.3)
	// or ServerKeyExchange (TLS 1.2) signature.
	SignatureScheme uint16
	ALPN            string // negotiated application protocol, if any
	// Certificates is the chain as the server sent it, leaf first.
	Certificates []*x509.Certificate
	// CertChainDigest is CertChainDigest(Certificates).
	CertChainDigest [32]byte
	// ServerProtectedFrom is the server-direction sequence number of the
	// first record of the application key epoch: for TLS 1.3 the record
	// after the one carrying the server Finished (protected under
	// server_application_traffic_secret_0); for TLS 1.2 the record after
	// the server's ChangeCipherSpec (the encrypted Finished, epoch sequence
	// number 0). Presentations count epoch sequence numbers from here.
	ServerProtectedFrom uint64
	// FinishedVerified reports that the server Finished MAC was checked
	// (TLS 1.3 only: in TLS 1.2 it is encrypted under keys the notary
	// never receives).
	FinishedVerified bool
	// TranscriptHash is, for TLS 1.3, the transcript hash from the
	// ClientHello through the server Finished: the context of the
	// application traffic secrets (RFC 8446 §7.1). Empty for TLS 1.2.
	TranscriptHash []byte
}

// CertChainDigest returns the digest that statements carry for a server
// certificate chain: SHA-256 over, for each certificate in the order the
// server sent them, its DER length as 4 bytes big endian followed by the
// DER bytes.
func CertChainDigest(certs []*x509.Certificate) [32]byte {
	h := sha256.New()
	var n [4]byte
	for _, c := range certs {
		binary.BigEndian.PutUint32(n[:], uint32(len(c.Raw)))
		h.Write(n[:])
		h.Write(c.Raw)
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// VerifyHandshake checks the identity of the server in a recorded session.
// records are the session's records of both directions in arrival order,
// at least up to the server Finished (TLS 1.3) or the server's
// ChangeCipherSpec (TLS 1.2); records after that are ignored.
//
// For TLS 1.3 it parses the ClientHello(s) and ServerHello (following a
// HelloRetryRequest with the message_hash transcript rule), decrypts the
// server's handshake flight with d.ServerHandshakeTrafficSecret alone,
// verifies the certificate chain against o.Roots for the server name at
// o.Now, the CertificateVerify signature over the transcript, and the
// server Finished MAC. For TLS 1.2 it verifies the certificate chain and
// the ServerKeyExchange signature over client_random ‖ server_random ‖
// params. It refuses TLS below 1.2, non-AEAD suites, session resumption,
// pre-shared keys, 0-RTT and unknown record types (ErrUnsupported).
//
// It does not check anything the client sent after its hello, nor any
// application data, and for TLS 1.2 it cannot check the server Finished.
func VerifyHandshake(records []Record, d Disclosure, o HandshakeOptions) (*Handshake, error) {
	if o.Roots == nil {
		return nil, hsErr(ErrCertificate, "options", errors.New("no root pool given"))
	}
	if o.Now.IsZero() {
		return nil, hsErr(ErrCertificate, "options", errors.New("no session time given"))
	}
	if o.SNI != "" && checkHostname(o.SNI) != nil {
		return nil, hsErr(ErrCertificate, "options", fmt.Errorf("expected server name %q is not a dns name", o.SNI))
	}
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
	hs := &Handshake{}
	copy(hs.ClientRandom[:], ch.random)

	var hrr *serverHello
	ch1 := ch
	if sh.isHRR {
		hrr = sh
		hs.HelloRetry = true
		if chMsg, err = cs.expect(typeClientHello, "second client hello"); err != nil {
			return nil, err
		}
		if ch, err = parseClientHello(chMsg); err != nil {
			return nil, err
		}
		if shMsg, err = ss.expect(typeServerHello, "server hello after retry"); err != nil {
			return nil, err
		}
		if sh, err = parseServerHello(shMsg); err != nil {
			return nil, err
		}
		if sh.isHRR {
			return nil, hsErr(ErrHandshake, "server hello", errors.New("second HelloRetryRequest"))
		}
		if hrr.version != VersionTLS13 || hrr.suite != sh.suite {
			return nil, hsErr(ErrHandshake, "hello retry", errors.New("retry parameters differ from server hello"))
		}
		if ch.sni != ch1.sni || !bytes.Equal(ch.random, ch1.random) {
			return nil, hsErr(ErrHandshake, "client hello", errors.New("second client hello changed its random or server name"))
		}
	}
	copy(hs.ServerRandom[:], sh.random)

	// Name checks common to both versions.
	name := o.SNI
	if ch.sni == "" {
		return nil, hsErr(ErrHandshake, "client hello", errors.New("no server_name"))
	}
	if name == "" {
		name = ch.sni
	} else if !strings.EqualFold(name, ch.sni) {
		return nil, hsErr(ErrCertificate, "server name", fmt.Errorf("client asked for %q, session is for %q", ch.sni, name))
	}
	hs.SNI = strings.ToLower(name)
	if ch.earlyData || ch1.earlyData {
		return nil, hsErr(ErrUnsupported, "client hello", errors.New("early data (0-rtt) offered"))
	}
	if ch.psk || ch1.psk || sh.psk {
		return nil, hsErr(ErrUnsupported, "hello", errors.New("pre-shared key / resumption offered"))
	}
	if !ch.offers(sh.suite) {
		return nil, hsErr(ErrHandshake, "server hello", fmt.Errorf("suite %#04x was not offered", sh.suite))
	}
	hs.Version, hs.CipherSuite, hs.Group, hs.ALPN = sh.version, sh.suite, sh.group, sh.alpn

	switch sh.version {
	case VersionTLS13:
		if !ch.offersVersion(VersionTLS13) {
			return nil, hsErr(ErrHandshake, "server hello", errors.New("tls 1.3 not offered"))
		}
		if !bytes.Equal(sh.sessionID, ch.sessionID) {
			return nil, hsErr(ErrHandshake, "server hello", errors.New("legacy_session_id_echo mismatch"))
		}
		err = verify13(hs, ch1, hrr, ch, sh, ss, d, o)
	case VersionTLS12:
		if ch.offersVersion(VersionTLS13) && bytes.Equal(sh.random[24:], []byte("DOWNGRD\x01")) {
			return nil, hsErr(ErrHandshake, "server hello", errors.New("tls 1.3 downgrade sentinel"))
		}
		if len(d.ServerHandshakeTrafficSecret) != 0 {
			return nil, hsErr(ErrHandshake, "disclosure", errors.New("tls 1.2 takes no disclosed secret"))
		}
		err = verify12(hs, ch, sh, ss, o)
	default:
		err = hsErr(ErrUnsupported, "server hello", fmt.Errorf("tls version %#04x", sh.version))
	}
	if err != nil {
		return nil, err
	}
	return hs, nil
}

func verify13(hs *Handshake, ch1 *clientHello, hrr *serverHello, ch2 *clientHello, sh *serverHello, ss *hsStream, d Disclosure, o HandshakeOptions) error {
	suite, err := suiteFor(VersionTLS13, sh.suite)
	if err != nil {
		return hsErr(ErrUnsupported, "server hello", err)
	}
	if !ss.atBoundary() {
		return hsErr(ErrHandshake, "server hello", errors.New("server hello does not end its record"))
	}
	secret := d.ServerHandshakeTrafficSecret
	if len(secret) != suite.Hash.Size() {
		return hsErr(ErrDecrypt, "disclosure", fmt.Errorf("server handshake traffic secret of %d bytes, want %d", len(secret), suite.Hash.Size()))
	}
	th := suite.Hash.New()
	if hrr != nil {
		h1 := suite.Hash.New()
		h1.Write(ch1.raw)
		th.Write([]byte{typeMessageHash, 0, 0, byte(suite.Hash.Size())})
		th.Write(h1.Sum(nil))
		th.Write(hrr.raw)
	}
	th.Write(ch2.raw)
	th.Write(sh.raw)

	op, err := NewOpener13(suite, secret)
	if err != nil {
		return hsErr(ErrDecrypt, "disclosure", err)
	}
	ps := &hsStream{recs: ss.recs[ss.i:], opener: op, skipCCS: true}
	ee, err := ps.expect(typeEncryptedExt, "encrypted extensions")
	if err != nil {
		return err
	}
	alpn, err := parseEncryptedExtensions(ee)
	if err != nil {
		return err
	}
	hs.ALPN = alpn
	th.Write(ee)
	msg, err := ps.nextMsg("certificate")
	if err != nil {
		return err
	}
	if msg[0] == typeCertificateRequest {
		th.Write(msg)
		if msg, err = ps.nextMsg("certificate"); err != nil {
			return err
		}
	}
	if msg[0] != typeCertificate {
		return hsErr(ErrUnsupported, "certificate", fmt.Errorf("handshake message %d instead of a certificate (psk?)", msg[0]))
	}
	certs, err := parseCertificate13(msg)
	if err != nil {
		return err
	}
	th.Write(msg)
	if err := verifyChain(hs, certs, o); err != nil {
		return err
	}
	cv, err := ps.expect(typeCertificateVerify, "certificate verify")
	if err != nil {
		return err
	}
	scheme, sig, err := parseSigned(cv[4:], "certificate verify")
	if err != nil {
		return err
	}
	signed := make([]byte, 0, 64+34+suite.Hash.Size())
	signed = append(signed, bytes.Repeat([]byte{0x20}, 64)...)
	signed = append(signed, "TLS 1.3, server CertificateVerify\x00"...)
	signed = th.Sum(signed)
	if err := verifySignature(certs[0].PublicKey, scheme, signed, sig, true); err != nil {
		return hsErr(ErrHandshakeSignature, "certificate verify", err)
	}
	hs.SignatureScheme = scheme
	th.Write(cv)
	fin, err := ps.expect(typeFinished, "finished")
	if err != nil {
		return err
	}
	want, err := finishedMAC(suite.Hash, secret, th.Sum(nil))
	if err != nil {
		return err
	}
	if !hmac.Equal(fin[4:], want) {
		return hsErr(ErrFinished, "finished", nil)
	}
	if !ps.atBoundary() {
		return hsErr(ErrHandshake, "finished", errors.New("data after the server finished in its record"))
	}
	th.Write(fin)
	hs.TranscriptHash = th.Sum(nil)
	hs.FinishedVerified = true
	hs.ServerProtectedFrom = ps.lastSeq + 1
	return nil
}

func verify12(hs *Handshake, ch *clientHello, sh *serverHello, ss *hsStream, o HandshakeOptions) error {
	suite, err := suiteFor(VersionTLS12, sh.suite)
	if err != nil {
		return hsErr(ErrUnsupported, "server hello", err)
	}
	if len(sh.sessionID) > 0 && bytes.Equal(sh.sessionID, ch.sessionID) {
		return hsErr(ErrUnsupported, "server hello", errors.New("session resumption"))
	}
	ss.skipCCS = false
	msg, err := ss.nextMsg("certificate")
	if err != nil {
		if errors.Is(err, errCCS) {
			return hsErr(ErrUnsupported, "server hello", errors.New("abbreviated handshake (session resumption)"))
		}
		return err
	}
	if msg[0] != typeCertificate {
		return hsErr(ErrUnsupported, "certificate", fmt.Errorf("handshake message %d instead of a certificate", msg[0]))
	}
	certs, err := parseCertificate12(msg)
	if err != nil {
		return err
	}
	if err := verifyChain(hs, certs, o); err != nil {
		return err
	}
	ske, err := ss.expect(typeServerKeyExchange, "server key exchange")
	if err != nil {
		return err
	}
	kx, err := parseServerKeyExchange(ske)
	if err != nil {
		return err
	}
	group, params, scheme, sig := kx.group, kx.params, kx.scheme, kx.sig
	pub := certs[0].PublicKey
	switch pub.(type) {
	case *ecdsa.PublicKey, ed25519.PublicKey:
		if !suite.ECDSA {
			return hsErr(ErrHandshake, "certificate", errors.New("ecdsa certificate for an ECDHE_RSA suite"))
		}
	case *rsa.PublicKey:
		if suite.ECDSA {
			return hsErr(ErrHandshake, "certificate", errors.New("rsa certificate for an ECDHE_ECDSA suite"))
		}
	}
	signed := make([]byte, 0, 64+len(params))
	signed = append(signed, ch.random...)
	signed = append(signed, sh.random...)
	signed = append(signed, params...)
	if err := verifySignature(pub, scheme, signed, sig, false); err != nil {
		return hsErr(ErrHandshakeSignature, "server key exchange", err)
	}
	hs.SignatureScheme, hs.Group = scheme, group
	msg, err = ss.nextMsg("server hello done")
	if err == nil && msg[0] == typeCertificateRequest {
		msg, err = ss.nextMsg("server hello done")
	}
	if err != nil {
		return err
	}
	if msg[0] != typeServerHelloDone || len(msg) != 4 {
		return hsErr(ErrHandshake, "server hello done", fmt.Errorf("handshake message %d", msg[0]))
	}
	// After the client's flight: optionally a NewSessionTicket, then
	// ChangeCipherSpec; the next record starts the protected epoch.
	for {
		msg, err = ss.nextMsg("change cipher spec")
		if errors.Is(err, errCCS) {
			break
		}
		if err != nil {
			return err
		}
		if msg[0] != typeNewSessionTicket {
			return hsErr(ErrHandshake, "server flight", fmt.Errorf("unexpected handshake message %d", msg[0]))
		}
	}
	hs.ServerProtectedFrom = ss.lastSeq + 1
	return nil
}

// serverKeyExchange is a parsed TLS 1.2 ECDHE ServerKeyExchange.
type serverKeyExchange struct {
	group  uint16
	point  []byte // the server's ECDHE public value
	params []byte // curve type, group and point: what the signature covers after the randoms
	scheme uint16
	sig    []byte
}

// parseServerKeyExchange reads an ECDHE ServerKeyExchange message (header
// included), refusing groups other than the four named ones.
func parseServerKeyExchange(ske []byte) (*serverKeyExchange, error) {
	s := cryptobyte.String(ske[4:])
	var curveType uint8
	kx := &serverKeyExchange{}
	if !s.ReadUint8(&curveType) || curveType != 3 || !s.ReadUint16(&kx.group) || !s.ReadUint8LengthPrefixed((*cryptobyte.String)(&kx.point)) || len(kx.point) == 0 {
		return nil, hsErr(ErrHandshake, "server key exchange", errors.New("malformed ecdhe parameters"))
	}
	switch kx.group {
	case 23, 24, 25, 29: // secp256r1, secp384r1, secp521r1, x25519
	default:
		return nil, hsErr(ErrUnsupported, "server key exchange", fmt.Errorf("group %d", kx.group))
	}
	kx.params = ske[4 : 4+4+len(kx.point)]
	var err error
	if kx.scheme, kx.sig, err = parseSigned(s, "server key exchange"); err != nil {
		return nil, err
	}
	return kx, nil
}

func verifyChain(hs *Handshake, certs []*x509.Certificate, o HandshakeOptions) error {
	if len(certs) == 0 {
		return hsErr(ErrCertificate, "certificate", errors.New("empty chain"))
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{
		Roots:         o.Roots,
		Intermediates: inter,
		DNSName:       hs.SNI,
		CurrentTime:   o.Now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return hsErr(ErrCertificate, "certificate", err)
	}
	hs.Certificates = certs
	hs.CertChainDigest = CertChainDigest(certs)
	return nil
}

// errCCS is returned by hsStream.nextMsg when it meets a ChangeCipherSpec
// and is not skipping them (TLS 1.2).
var errCCS = errors.New("change cipher spec")

// hsStream reassembles the handshake messages of one direction from its
// records, in the clear or, with an opener, under TLS 1.3 protection.
type hsStream struct {
	recs    []Record
	i       int
	buf     []byte
	opener  *Opener
	epoch   uint64 // sequence number within the opener's epoch
	skipCCS bool
	lastSeq uint64
}

func (s *hsStream) atBoundary() bool { return len(s.buf) == 0 }

func (s *hsStream) expect(typ uint8, step string) ([]byte, error) {
	m, err := s.nextMsg(step)
	if err != nil {
		return nil, err
	}
	if m[0] != typ {
		return nil, hsErr(ErrHandshake, step, fmt.Errorf("handshake message %d, want %d", m[0], typ))
	}
	return m, nil
}

// nextMsg returns the next whole handshake message, header included.
func (s *hsStream) nextMsg(step string) ([]byte, error) {
	for {
		if len(s.buf) >= 4 {
			n := int(s.buf[1])<<16 | int(s.buf[2])<<8 | int(s.buf[3])
			if n > maxHandshakeMessage {
				return nil, hsErr(ErrHandshake, step, fmt.Errorf("handshake message of %d bytes", n))
			}
			if len(s.buf) >= 4+n {
				m := s.buf[: 4+n : 4+n]
				s.buf = s.buf[4+n:]
				return m, nil
			}
		}
		if s.i >= len(s.recs) {
			return nil, hsErr(ErrTruncated, step, errors.New("records end before the message"))
		}
		r := s.recs[s.i]
		s.i++
		s.lastSeq = r.Seq
		frag := r.Fragment()
		switch r.Type {
		case RecordChangeCipherSpec:
			// TLS 1.3 middlebox compatibility allows one before the first
			// protected record, never after it.
			if len(frag) != 1 || frag[0] != 1 || len(s.buf) != 0 || s.opener != nil && s.epoch > 0 {
				return nil, &RecordError{Dir: r.Dir, Seq: r.Seq, Reason: "bad change_cipher_spec", Err: ErrHandshake}
			}
			if !s.skipCCS {
				return nil, errCCS
			}
			continue
		case RecordAlert:
			ae := &AlertError{Dir: r.Dir}
			if len(frag) == 2 {
				ae.Level, ae.Description = frag[0], frag[1]
			}
			return nil, hsErr(ErrHandshake, step, ae)
		case RecordHandshake:
			if s.opener != nil {
				return nil, &RecordError{Dir: r.Dir, Seq: r.Seq, Reason: "plaintext handshake after keys changed", Err: ErrHandshake}
			}
			s.buf = append(s.buf, frag...)
			continue
		case RecordApplicationData:
			if s.opener != nil {
				break
			}
			return nil, &RecordError{Dir: r.Dir, Seq: r.Seq, Reason: "protected record before the handshake completed", Err: ErrHandshake}
		}
		ct, pt, err := s.opener.Open(nil, s.epoch, r)
		s.epoch++
		if err != nil {
			return nil, hsErr(ErrDecrypt, step, err)
		}
		if ct != RecordHandshake {
			return nil, hsErr(ErrHandshake, step, fmt.Errorf("protected record of type %d in the server flight", ct))
		}
		s.buf = append(s.buf, pt...)
	}
}

type clientHello struct {
	raw       []byte
	random    []byte
	sessionID []byte
	suites    []uint16
	versions  []uint16
	sni       string
	psk       bool
	earlyData bool
	ems       bool            // offers the extended master secret (RFC 7627)
	shares    []keyShareEntry // key_share entries, in order
}

// keyShareEntry is one KeyShareEntry of a ClientHello.
type keyShareEntry struct {
	group uint16
	key   []byte
}

func (c *clientHello) offers(suite uint16) bool {
	for _, s := range c.suites {
		if s == suite {
			return true
		}
	}
	return false
}

func (c *clientHello) offersVersion(v uint16) bool {
	if len(c.versions) == 0 {
		return v == VersionTLS12
	}
	for _, x := range c.versions {
		if x == v {
			return true
		}
	}
	return false
}

func malformed(step string) error {
	return hsErr(ErrHandshake, step, errors.New("malformed message"))
}

// readExtensions splits an extensions block, refusing duplicates.
func readExtensions(s cryptobyte.String, step string, f func(typ uint16, data cryptobyte.String) error) error {
	if s.Empty() {
		return nil
	}
	var exts cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&exts) || !s.Empty() {
		return malformed(step)
	}
	seen := map[uint16]bool{}
	for !exts.Empty() {
		var typ uint16
		var data cryptobyte.String
		if !exts.ReadUint16(&typ) || !exts.ReadUint16LengthPrefixed(&data) {
			return malformed(step)
		}
		if seen[typ] {
			return hsErr(ErrHandshake, step, fmt.Errorf("duplicate extension %d", typ))
		}
		seen[typ] = true
		if err := f(typ, data); err != nil {
			return err
		}
	}
	return nil
}

func parseClientHello(msg []byte) (*clientHello, error) {
	const step = "client hello"
	c := &clientHello{raw: msg}
	s := cryptobyte.String(msg[4:])
	var legacy uint16
	var sid, suites, comp cryptobyte.String
	if !s.ReadUint16(&legacy) || !s.ReadBytes(&c.random, 32) || !s.ReadUint8LengthPrefixed(&sid) || len(sid) > 32 ||
		!s.ReadUint16LengthPrefixed(&suites) || len(suites)%2 != 0 || !s.ReadUint8LengthPrefixed(&comp) {
		return nil, malformed(step)
	}
	if legacy < VersionTLS12 {
		return nil, hsErr(ErrUnsupported, step, fmt.Errorf("client version %#04x", legacy))
	}
	c.sessionID = sid
	for !suites.Empty() {
		var id uint16
		suites.ReadUint16(&id)
		c.suites = append(c.suites, id)
	}
	err := readExtensions(s, step, func(typ uint16, d cryptobyte.String) error {
		switch typ {
		case extServerName:
			var list cryptobyte.String
			if !d.ReadUint16LengthPrefixed(&list) || !d.Empty() {
				return malformed(step)
			}
			for !list.Empty() {
				var nt uint8
				var name cryptobyte.String
				if !list.ReadUint8(&nt) || !list.ReadUint16LengthPrefixed(&name) {
					return malformed(step)
				}
				if nt == 0 {
					if c.sni != "" || checkHostname(string(name)) != nil {
						return hsErr(ErrHandshake, step, errors.New("bad server_name"))
					}
					c.sni = string(name)
				}
			}
		case extSupportedVersions:
			var list cryptobyte.String
			if !d.ReadUint8LengthPrefixed(&list) || !d.Empty() || len(list)%2 != 0 || len(list) == 0 {
				return malformed(step)
			}
			for !list.Empty() {
				var v uint16
				list.ReadUint16(&v)
				c.versions = append(c.versions, v)
			}
		case extPreSharedKey:
			c.psk = true
		case extEarlyData:
			c.earlyData = true
		case extExtendedMaster:
			c.ems = true
		case extKeyShare:
			var list cryptobyte.String
			if !d.ReadUint16LengthPrefixed(&list) || !d.Empty() {
				return malformed(step)
			}
			for !list.Empty() {
				var e keyShareEntry
				var key cryptobyte.String
				if !list.ReadUint16(&e.group) || !list.ReadUint16LengthPrefixed(&key) || len(key) == 0 {
					return malformed(step)
				}
				e.key = key
				c.shares = append(c.shares, e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

type serverHello struct {
	raw       []byte
	random    []byte
	sessionID []byte
	suite     uint16
	version   uint16
	group     uint16
	keyShare  []byte // the server's key_share (TLS 1.3 ServerHello; empty in a HelloRetryRequest)
	psk       bool
	isHRR     bool
	ems       bool // the server agreed to the extended master secret (TLS 1.2)
	alpn      string
}

func parseServerHello(msg []byte) (*serverHello, error) {
	const step = "server hello"
	h := &serverHello{raw: msg}
	s := cryptobyte.String(msg[4:])
	var legacy uint16
	var sid cryptobyte.String
	var comp uint8
	if !s.ReadUint16(&legacy) || !s.ReadBytes(&h.random, 32) || !s.ReadUint8LengthPrefixed(&sid) || len(sid) > 32 ||
		!s.ReadUint16(&h.suite) || !s.ReadUint8(&comp) {
		return nil, malformed(step)
	}
	if comp != 0 {
		return nil, hsErr(ErrUnsupported, step, errors.New("compression"))
	}
	h.sessionID = sid
	h.isHRR = bytes.Equal(h.random, helloRetryRandom[:])
	h.version = legacy
	var selected uint16
	err := readExtensions(s, step, func(typ uint16, d cryptobyte.String) error {
		switch typ {
		case extSupportedVersions:
			if !d.ReadUint16(&selected) || !d.Empty() {
				return malformed(step)
			}
		case extPreSharedKey:
			h.psk = true
		case extKeyShare:
			if !d.ReadUint16(&h.group) {
				return malformed(step)
			}
			if !h.isHRR {
				var key cryptobyte.String
				if !d.ReadUint16LengthPrefixed(&key) || !d.Empty() || len(key) == 0 {
					return malformed(step)
				}
				h.keyShare = key
			}
		case extExtendedMaster:
			if !d.Empty() {
				return malformed(step)
			}
			h.ems = true
		case extALPN:
			alpn, err := parseALPN(d, step)
			if err != nil {
				return err
			}
			h.alpn = alpn
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if selected != 0 {
		if legacy != VersionTLS12 {
			return nil, hsErr(ErrHandshake, step, errors.New("supported_versions with a legacy version other than tls 1.2"))
		}
		h.version = selected
	}
	if h.version < VersionTLS12 || h.version > VersionTLS13 {
		return nil, hsErr(ErrUnsupported, step, fmt.Errorf("tls version %#04x", h.version))
	}
	if h.isHRR && h.version != VersionTLS13 {
		return nil, hsErr(ErrHandshake, step, errors.New("hello retry request without tls 1.3"))
	}
	return h, nil
}

func parseALPN(d cryptobyte.String, step string) (string, error) {
	var list, proto cryptobyte.String
	if !d.ReadUint16LengthPrefixed(&list) || !d.Empty() || !list.ReadUint8LengthPrefixed(&proto) || !list.Empty() || len(proto) == 0 {
		return "", malformed(step)
	}
	return string(proto), nil
}

func parseEncryptedExtensions(msg []byte) (string, error) {
	const step = "encrypted extensions"
	var alpn string
	s := cryptobyte.String(msg[4:])
	if s.Empty() {
		return "", malformed(step)
	}
	err := readExtensions(s, step, func(typ uint16, d cryptobyte.String) error {
		switch typ {
		case extEarlyData:
			return hsErr(ErrUnsupported, step, errors.New("early data accepted"))
		case extALPN:
			var err error
			alpn, err = parseALPN(d, step)
			return err
		}
		return nil
	})
	return alpn, err
}

func parseCertificate13(msg []byte) ([]*x509.Certificate, error) {
	const step = "certificate"
	s := cryptobyte.String(msg[4:])
	var ctx, list cryptobyte.String
	if !s.ReadUint8LengthPrefixed(&ctx) || len(ctx) != 0 || !s.ReadUint24LengthPrefixed(&list) || !s.Empty() {
		return nil, malformed(step)
	}
	var certs []*x509.Certificate
	for !list.Empty() {
		var der, exts cryptobyte.String
		if !list.ReadUint24LengthPrefixed(&der) || len(der) == 0 || !list.ReadUint16LengthPrefixed(&exts) {
			return nil, malformed(step)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, hsErr(ErrCertificate, step, err)
		}
		certs = append(certs, c)
	}
	return certs, nil
}

func parseCertificate12(msg []byte) ([]*x509.Certificate, error) {
	const step = "certificate"
	s := cryptobyte.String(msg[4:])
	var list cryptobyte.String
	if !s.ReadUint24LengthPrefixed(&list) || !s.Empty() {
		return nil, malformed(step)
	}
	var certs []*x509.Certificate
	for !list.Empty() {
		var der cryptobyte.String
		if !list.ReadUint24LengthPrefixed(&der) || len(der) == 0 {
			return nil, malformed(step)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, hsErr(ErrCertificate, step, err)
		}
		certs = append(certs, c)
	}
	return certs, nil
}

func parseSigned(s cryptobyte.String, step string) (uint16, []byte, error) {
	var scheme uint16
	var sig cryptobyte.String
	if !s.ReadUint16(&scheme) || !s.ReadUint16LengthPrefixed(&sig) || !s.Empty() || len(sig) == 0 {
		return 0, nil, malformed(step)
	}
	return scheme, sig, nil
}

// verifySignature checks a handshake signature with scheme (RFC 8446
// §4.2.3). TLS 1.3 refuses PKCS #1 v1.5 and requires the ECDSA curve to
// match the scheme; SHA-1 schemes are refused everywhere.
func verifySignature(pub crypto.PublicKey, scheme uint16, signed, sig []byte, tls13 bool) error {
	var h crypto.Hash
	var kind string
	var curve elliptic.Curve
	switch scheme {
	case 0x0401, 0x0501, 0x0601:
		if tls13 {
			return fmt.Errorf("%w: rsa pkcs#1 v1.5 in tls 1.3", ErrUnsupported)
		}
		kind = "pkcs1"
		h = map[uint16]crypto.Hash{0x0401: crypto.SHA256, 0x0501: crypto.SHA384, 0x0601: crypto.SHA512}[scheme]
	case 0x0804, 0x0805, 0x0806:
		kind = "pss"
		h = map[uint16]crypto.Hash{0x0804: crypto.SHA256, 0x0805: crypto.SHA384, 0x0806: crypto.SHA512}[scheme]
	case 0x0403, 0x0503, 0x0603:
		kind = "ecdsa"
		h = map[uint16]crypto.Hash{0x0403: crypto.SHA256, 0x0503: crypto.SHA384, 0x0603: crypto.SHA512}[scheme]
		curve = map[uint16]elliptic.Curve{0x0403: elliptic.P256(), 0x0503: elliptic.P384(), 0x0603: elliptic.P521()}[scheme]
	case 0x0807:
		kind = "ed25519"
	default:
		return fmt.Errorf("%w: signature scheme %#04x", ErrUnsupported, scheme)
	}
	var digest []byte
	if kind != "ed25519" {
		d := h.New()
		d.Write(signed)
		digest = d.Sum(nil)
	}
	switch kind {
	case "pkcs1", "pss":
		k, ok := pub.(*rsa.PublicKey)
		if !ok {
			return errors.New("rsa signature from a non-rsa key")
		}
		if kind == "pkcs1" {
			return rsa.VerifyPKCS1v15(k, h, digest, sig)
		}
		return rsa.VerifyPSS(k, h, digest, sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
	case "ecdsa":
		k, ok := pub.(*ecdsa.PublicKey)
		if !ok {
			return errors.New("ecdsa signature from a non-ecdsa key")
		}
		if tls13 && k.Curve != curve {
			return errors.New("ecdsa curve does not match the signature scheme")
		}
		if !ecdsa.VerifyASN1(k, digest, sig) {
			return errors.New("ecdsa signature does not verify")
		}
		return nil
	default:
		k, ok := pub.(ed25519.PublicKey)
		if !ok {
			return errors.New("ed25519 signature from a non-ed25519 key")
		}
		if !ed25519.Verify(k, signed, sig) {
			return errors.New("ed25519 signature does not verify")
		}
		return nil
	}
}
