package notary

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/acds-project/acds/mpctls"
)

// TLS constants the notary's in-flight policy needs. The full handshake
// checks live in mpctls.VerifyHandshake; these are only what is needed to
// refuse a session early, before any of its bytes reach the other side.
const (
	recordTypeCCS       = 20
	recordTypeHandshake = 22
	recordTypeAppData   = 23

	msgClientHello = 1
	msgServerHello = 2

	extServerName        = 0
	extSessionTicket     = 35
	extPreSharedKey      = 41
	extEarlyData         = 42
	extSupportedVersions = 43

	versionTLS12 = 0x0303
	versionTLS13 = 0x0304

	// maxHelloBytes bounds the reassembly buffer of the plaintext hellos.
	maxHelloBytes = 64 << 10
)

// helloRetryRandom is the ServerHello.random that marks a HelloRetryRequest
// (RFC 8446 §4.1.3): SHA-256 of "HelloRetryRequest".
var helloRetryRandom = sha256.Sum256([]byte("HelloRetryRequest"))

// aeadSuites are the cipher suites the notary lets through, by version.
var aeadSuites13 = map[uint16]bool{
	0x1301: true, // TLS_AES_128_GCM_SHA256
	0x1302: true, // TLS_AES_256_GCM_SHA384
	0x1303: true, // TLS_CHACHA20_POLY1305_SHA256
}

var aeadSuites12 = map[uint16]bool{
	0xc02b: true, // ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
	0xc02c: true, // ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
	0xc02f: true, // ECDHE_RSA_WITH_AES_128_GCM_SHA256
	0xc030: true, // ECDHE_RSA_WITH_AES_256_GCM_SHA384
	0xcca8: true, // ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
	0xcca9: true, // ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
}

// clientHello is what the policy reads from a ClientHello.
type clientHello struct {
	sessionID  []byte
	serverName string
	maxVersion uint16
}

// serverHello is what the policy reads from a ServerHello.
type serverHello struct {
	retry     bool // a HelloRetryRequest
	version   uint16
	suite     uint16
	sessionID []byte
}

// helloWatch follows the plaintext start of a session in both directions
// and refuses what the notary does not notarize. It is driven by the two
// relay goroutines under the session lock, one record at a time, before
// the record is forwarded.
type helloWatch struct {
	cbuf, sbuf []byte // partial handshake messages per direction
	cDone      bool   // client direction no longer plaintext-parsed
	sDone      bool   // server direction no longer plaintext-parsed
	ccsSeen    bool   // the client sent change_cipher_spec
	hrr        bool   // the server sent a HelloRetryRequest
	chCount    int    // ClientHellos seen
	ch         *clientHello
	sh         *serverHello
}

// refuse builds the refusal error for a policy violation.
func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %w", ErrRefused, fmt.Errorf(format, args...))
}

// observe inspects one record before it is relayed.
func (w *helloWatch) observe(rec mpctls.Record) error {
	frag := rec.Raw[5:]
	if rec.Dir == mpctls.ClientToServer {
		return w.observeClient(rec.Type, frag)
	}
	return w.observeServer(rec.Type, frag)
}

func (w *helloWatch) observeClient(typ uint8, frag []byte) error {
	if w.chCount == 0 && typ != recordTypeHandshake {
		return refuse("first client record has type %d, not handshake", typ)
	}
	if w.cDone {
		return nil
	}
	switch typ {
	case recordTypeCCS:
		w.ccsSeen = true
		if !w.hrr || w.chCount >= 2 {
			w.cDone = true
		}
		return nil
	case recordTypeAppData:
		if w.hrr && w.chCount < 2 {
			return refuse("encrypted client record before the second ClientHello")
		}
		w.cDone = true
		return nil
	case recordTypeHandshake:
	default:
		return nil
	}
	w.cbuf = append(w.cbuf, frag...)
	for {
		msgType, body, rest, ok, err := nextMessage(w.cbuf)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		w.cbuf = rest
		if msgType != msgClientHello {
			// TLS 1.2 ClientKeyExchange and friends: no policy to apply.
			if w.chCount == 0 {
				return refuse("first client handshake message has type %d", msgType)
			}
			continue
		}
		if w.chCount >= 2 || (w.chCount == 1 && !w.hrr) {
			return refuse("unexpected ClientHello")
		}
		ch, err := parseClientHello(body)
		if err != nil {
			return err
		}
		w.chCount++
		if w.ch != nil && ch.serverName != w.ch.serverName {
			return refuse("second ClientHello changes the server name")
		}
		w.ch = ch
		if w.chCount == 2 || (!w.hrr && w.ccsSeen) {
			w.cDone = true
		}
	}
}

func (w *helloWatch) observeServer(typ uint8, frag []byte) error {
	if w.sDone {
		return nil
	}
	if typ != recordTypeHandshake {
		if typ == recordTypeCCS && w.hrr {
			return nil // middlebox-compatibility CCS after a HelloRetryRequest
		}
		if w.sh == nil || w.sh.retry {
			// An alert from the server ends the session; anything else
			// before the ServerHello is not TLS as the notary knows it.
			if typ == 21 {
				w.sDone = true
				return nil
			}
			return refuse("server record of type %d before its ServerHello", typ)
		}
		w.sDone = true
		return nil
	}
	w.sbuf = append(w.sbuf, frag...)
	for !w.sDone {
		msgType, body, rest, ok, err := nextMessage(w.sbuf)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		w.sbuf = rest
		if msgType != msgServerHello {
			return refuse("first server handshake message has type %d", msgType)
		}
		sh, err := parseServerHello(body)
		if err != nil {
			return err
		}
		if err := w.checkServerHello(sh); err != nil {
			return err
		}
		w.sh = sh
		if sh.retry {
			w.hrr = true
			continue
		}
		w.sDone = true
	}
	return nil
}

// checkServerHello applies the version, suite and resumption policy.
func (w *helloWatch) checkServerHello(sh *serverHello) error {
	if w.ch == nil {
		return refuse("ServerHello before any ClientHello")
	}
	if sh.retry && w.hrr {
		return refuse("second HelloRetryRequest")
	}
	switch sh.version {
	case versionTLS13:
		if !aeadSuites13[sh.suite] {
			return refuse("tls 1.3 cipher suite %#04x is not notarized", sh.suite)
		}
	case versionTLS12:
		if sh.retry {
			return refuse("HelloRetryRequest for tls 1.2")
		}
		if !aeadSuites12[sh.suite] {
			return refuse("tls 1.2 cipher suite %#04x is not an ecdhe aead suite", sh.suite)
		}
		if len(sh.sessionID) > 0 && bytes.Equal(sh.sessionID, w.ch.sessionID) {
			return refuse("tls 1.2 session resumption")
		}
	default:
		return refuse("tls version %#04x is below 1.2", sh.version)
	}
	return nil
}

// nextMessage splits one handshake message off buf. ok is false when more
// bytes are needed.
func nextMessage(buf []byte) (typ uint8, body, rest []byte, ok bool, err error) {
	if len(buf) < 4 {
		if len(buf) > maxHelloBytes {
			return 0, nil, nil, false, refuse("handshake message too large")
		}
		return 0, nil, buf, false, nil
	}
	n := int(buf[1])<<16 | int(buf[2])<<8 | int(buf[3])
	if n > maxHelloBytes {
		return 0, nil, nil, false, refuse("handshake message of %d bytes is too large", n)
	}
	if len(buf) < 4+n {
		return 0, nil, buf, false, nil
	}
	return buf[0], buf[4 : 4+n], buf[4+n:], true, nil
}

// reader is a minimal bounds-checked cursor over handshake bytes.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) take(n int) []byte {
	if r.bad || n < 0 || len(r.b) < n {
		r.bad = true
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() int {
	v := r.take(1)
	if v == nil {
		return 0
	}
	return int(v[0])
}

func (r *reader) u16() int {
	v := r.take(2)
	if v == nil {
		return 0
	}
	return int(binary.BigEndian.Uint16(v))
}

func (r *reader) vec8() []byte  { return r.take(r.u8()) }
func (r *reader) vec16() []byte { return r.take(r.u16()) }

// extensions parses an extensions block into type → data, refusing
// duplicates.
func extensions(b []byte) (map[int][]byte, error) {
	exts := map[int][]byte{}
	r := &reader{b: b}
	for len(r.b) > 0 && !r.bad {
		typ := r.u16()
		data := r.vec16()
		if r.bad {
			break
		}
		if _, dup := exts[typ]; dup {
			return nil, refuse("duplicate extension %d", typ)
		}
		exts[typ] = data
	}
	if r.bad {
		return nil, refuse("malformed extensions")
	}
	return exts, nil
}

func parseClientHello(body []byte) (*clientHello, error) {
	r := &reader{b: body}
	legacy := r.u16()
	r.take(32) // random
	sid := r.vec8()
	r.vec16() // cipher suites
	r.vec8()  // compression methods
	var extBytes []byte
	if len(r.b) > 0 {
		extBytes = r.vec16()
	}
	if r.bad || len(r.b) != 0 {
		return nil, refuse("malformed ClientHello")
	}
	exts, err := extensions(extBytes)
	if err != nil {
		return nil, err
	}
	if _, ok := exts[extPreSharedKey]; ok {
		return nil, refuse("ClientHello offers a pre-shared key (resumption)")
	}
	if _, ok := exts[extEarlyData]; ok {
		return nil, refuse("ClientHello offers 0-RTT early data")
	}
	if t, ok := exts[extSessionTicket]; ok && len(t) > 0 {
		return nil, refuse("ClientHello presents a session ticket (resumption)")
	}
	ch := &clientHello{sessionID: append([]byte(nil), sid...), maxVersion: uint16(legacy)}
	if sv, ok := exts[extSupportedVersions]; ok {
		vr := &reader{b: sv}
		list := vr.vec8()
		if vr.bad || len(list)%2 != 0 || len(vr.b) != 0 {
			return nil, refuse("malformed supported_versions")
		}
		ch.maxVersion = 0
		for i := 0; i+1 < len(list); i += 2 {
			v := binary.BigEndian.Uint16(list[i:])
			if v&0x0f0f == 0x0a0a { // GREASE
				continue
			}
			if v > ch.maxVersion {
				ch.maxVersion = v
			}
		}
	}
	if ch.maxVersion < versionTLS12 {
		return nil, refuse("client offers nothing above tls %#04x", ch.maxVersion)
	}
	if sn, ok := exts[extServerName]; ok {
		sr := &reader{b: sn}
		list := &reader{b: sr.vec16()}
		for len(list.b) > 0 && !list.bad {
			kind := list.u8()
			name := list.vec16()
			if kind == 0 && !list.bad {
				ch.serverName = string(name)
			}
		}
		if sr.bad || list.bad {
			return nil, refuse("malformed server_name")
		}
	}
	return ch, nil
}

func parseServerHello(body []byte) (*serverHello, error) {
	r := &reader{b: body}
	legacy := r.u16()
	random := r.take(32)
	sid := r.vec8()
	suite := r.u16()
	r.u8() // compression method
	var extBytes []byte
	if len(r.b) > 0 {
		extBytes = r.vec16()
	}
	if r.bad || len(r.b) != 0 {
		return nil, refuse("malformed ServerHello")
	}
	exts, err := extensions(extBytes)
	if err != nil {
		return nil, err
	}
	sh := &serverHello{
		retry:     bytes.Equal(random, helloRetryRandom[:]),
		version:   uint16(legacy),
		suite:     uint16(suite),
		sessionID: append([]byte(nil), sid...),
	}
	if sv, ok := exts[extSupportedVersions]; ok {
		if len(sv) != 2 {
			return nil, refuse("malformed supported_versions in ServerHello")
		}
		sh.version = binary.BigEndian.Uint16(sv)
	}
	if _, ok := exts[extPreSharedKey]; ok {
		return nil, refuse("server accepted a pre-shared key (resumption)")
	}
	if _, ok := exts[extEarlyData]; ok {
		return nil, refuse("server accepted early data")
	}
	return sh, nil
}
