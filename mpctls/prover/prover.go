package prover

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/acds-project/acds/mpctls"
	"github.com/acds-project/acds/mpctls/notary"
)

// Error classes of the prover; every error it returns wraps one of them or
// an mpctls sentinel (for example mpctls.ErrDecrypt for a server record
// that does not authenticate, mpctls.ErrSignature for a statement not
// signed by a trusted notary key).
var (
	// ErrNotary reports a notary that refused a request or answered
	// something unusable; a *NotaryError gives the detail.
	ErrNotary = errors.New("prover: notary error")
	// ErrMismatch reports a statement that does not describe the session
	// the prover saw: another Merkle root, other counts, another id.
	ErrMismatch = errors.New("prover: statement does not match the session")
	// ErrIncomplete reports a session that cannot be finalized yet or at
	// all: still open, failed handshake, tunnel not ended in time.
	ErrIncomplete = errors.New("prover: session incomplete")
	// ErrLimit reports a session cut because it exceeded
	// Dialer.MaxSessionBytes.
	ErrLimit = errors.New("prover: session limit exceeded")
	// ErrRefusedAddress reports a tunnel to an address Dialer.AllowAddr
	// refuses, or one whose address the notary did not report; nothing
	// was sent through it. An *AddressError gives the detail.
	ErrRefusedAddress = errors.New("prover: the notary's target address is refused")
)

// AddressError is a tunnel the prover closed before sending anything
// because of the address the notary reported it dialled. Its text names
// the host but not the address, which may be an internal one, nor the
// rule's words; Err (the rule's error, or nil when the notary reported no
// address) stays reachable with errors.Is and errors.As.
type AddressError struct {
	Host string
	Err  error
}

// Error names the host.
func (e *AddressError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("%v: the notary did not report the address it dialled for %s", ErrRefusedAddress, e.Host)
	}
	return fmt.Sprintf("%v: %s resolves to an address that is not allowed", ErrRefusedAddress, e.Host)
}

// Unwrap returns ErrRefusedAddress and the rule's error.
func (e *AddressError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrRefusedAddress}
	}
	return []error{ErrRefusedAddress, e.Err}
}

// NotaryError is a refusal or failure reported by the notary.
type NotaryError struct {
	Status int    // HTTP status
	Type   string // problem type URN, when the notary sent one
	Detail string // problem detail, capped
}

// Error describes the notary's answer.
func (e *NotaryError) Error() string {
	return fmt.Sprintf("%v: status %d %s: %s", ErrNotary, e.Status, e.Type, e.Detail)
}

// Unwrap returns ErrNotary.
func (e *NotaryError) Unwrap() error { return ErrNotary }

// AEAD suites a prover offers in TLS 1.2. TLS 1.3 suites are all AEAD.
var aeadSuites12 = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// Dialer opens TLS connections through a recording notary, one notarized
// session per connection. Its DialTLSContext method fits
// http.Transport.DialTLSContext. Set the fields before the first dial and
// do not copy a Dialer after use.
type Dialer struct {
	// Notary is the host:port of the notary. Required.
	Notary string
	// NotaryKeys are the keys statements must be signed with. Required:
	// an empty list makes every Finalize fail.
	NotaryKeys []ed25519.PublicKey
	// TLSConfig is the base TLS configuration (RootCAs, Time,
	// CurvePreferences, MinVersion, MaxVersion, CipherSuites). Nil means
	// the defaults. The dialer clones it and enforces TLS ≥ 1.2, AEAD
	// ECDHE suites, no session cache or tickets, HTTP/1.1 and ServerName =
	// the dialled host; it installs its own in-memory KeyLogWriter.
	TLSConfig *tls.Config
	// DialNotary connects to the notary. Nil means a net.Dialer with a
	// 10 s timeout. A connection with a CloseWrite method (as *net.TCPConn
	// has) lets closing a session half-close the tunnel, so the server's
	// last records are still received; without one, closing waits for the
	// server's answer to close_notify or for DrainTimeout.
	DialNotary func(ctx context.Context, network, address string) (net.Conn, error)
	// Now is the clock the statement's session times are checked against.
	// Nil means time.Now.
	Now func() time.Time
	// ClockSkew is how far the notary's clock may be from Now. Zero
	// means 2 minutes.
	ClockSkew time.Duration
	// DrainTimeout is how long closing a connection waits for the notary
	// to end the tunnel after the prover half-closed it. Zero means 5 s.
	DrainTimeout time.Duration
	// AllowAddr, when set, checks the address the notary reports it
	// resolved and dialled for host (notary.AddressHeader in its CONNECT answer)
	// before anything is sent through the tunnel, not even the
	// ClientHello: a refused address, or a notary that reports none, ends
	// the dial with an *AddressError. Finalize also requires the
	// statement to name that same address. It guards against a notary
	// whose own address rules are laxer than the prover's (an external
	// notary without a guard); this package has no rule of its own, so a
	// service passes its SSRF rule (portal.Guard.AllowAddrPort). Nil
	// checks nothing.
	AllowAddr func(host string, addr netip.AddrPort) error
	// MaxSessionBytes bounds the TLS bytes one session may carry, both
	// directions together; the prover keeps every record in memory until
	// the session is finalized, so this bounds its memory. A session
	// beyond it is cut (reads fail with ErrLimit) and cannot be finalized.
	// Zero means 256 MiB, the notary's default.
	MaxSessionBytes int64

	mu       sync.Mutex
	sessions []*Session
	client   *http.Client
}

func (d *Dialer) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Dialer) dialNotary(ctx context.Context, network, addr string) (net.Conn, error) {
	if d.DialNotary != nil {
		return d.DialNotary(ctx, network, addr)
	}
	nd := &net.Dialer{Timeout: 10 * time.Second}
	return nd.DialContext(ctx, network, addr)
}

func (d *Dialer) controlClient() *http.Client {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.client == nil {
		d.client = &http.Client{Transport: &http.Transport{
			DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return d.dialNotary(ctx, "tcp", d.Notary) },
			DisableCompression:  true,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     30 * time.Second,
		}}
	}
	return d.client
}

// CloseIdleConnections closes the dialer's idle control connections to
// the notary (those that opened and finalized sessions), which otherwise
// stay open for 30 s each. Whoever made the Dialer for one fetch calls
// it once FinalizeAll has returned; a later session opens a new one.
func (d *Dialer) CloseIdleConnections() {
	d.mu.Lock()
	c := d.client
	d.mu.Unlock()
	if c != nil {
		c.CloseIdleConnections()
	}
}

// Sessions returns the sessions opened by this dialer and not yet
// finalized, in dial order.
//
// A session leaves the list once Finalize has run on it, successfully or
// not, so a long-lived Dialer does not hold on to finished sessions.
func (d *Dialer) Sessions() []*Session {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*Session(nil), d.sessions...)
}

// SessionOf returns the session whose connection c is (as
// DialTLSContext returned it), or nil when c is not one of the sessions
// opened by this dialer and not yet finalized.
func (d *Dialer) SessionOf(c net.Conn) *Session {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.sessions {
		if net.Conn(s.conn) == c {
			return s
		}
	}
	return nil
}

// ErrNotServerName is returned (wrapped) for a portal host that is an IP
// address: a notarized session needs a DNS name.
var ErrNotServerName = errors.New("notarized sessions need a DNS name")

// CheckServerName is the rule on the host of a notarized session: a DNS
// name, not an IP address. TLS sends no server name for an IP address,
// and a statement names the server by the name its certificate was
// checked for. DialTLSContext applies it, and so do callers that refuse
// such a portal before any connection (portal.Fetcher.Admit).
func CheckServerName(host string) error {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if _, err := netip.ParseAddr(h); err == nil {
		return fmt.Errorf("prover: %q is an IP address: %w", host, ErrNotServerName)
	}
	return nil
}

// DialTLSContext opens a CONNECT tunnel to addr through the notary and
// runs a TLS client handshake over it. The returned connection is a
// *tls.Conn; closing it ends the notarized session, which Finalize then
// turns into a statement. network must be "tcp" (or "tcp4"/"tcp6").
func (d *Dialer) DialTLSContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if !strings.HasPrefix(network, "tcp") {
		return nil, fmt.Errorf("prover: network %q is not tcp", network)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("prover: address %q: %w", addr, err)
	}
	if err := CheckServerName(host); err != nil {
		return nil, err
	}
	raw, err := d.dialNotary(ctx, "tcp", d.Notary)
	if err != nil {
		return nil, fmt.Errorf("%w: dial: %w", ErrNotary, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		raw.SetDeadline(dl)
	}
	id, dialled, err := connect(raw, addr)
	if err != nil {
		raw.Close()
		return nil, err
	}
	if d.AllowAddr != nil {
		ap, perr := netip.ParseAddrPort(dialled)
		if perr != nil {
			raw.Close()
			return nil, &AddressError{Host: host}
		}
		if err := d.AllowAddr(host, ap); err != nil {
			raw.Close()
			return nil, &AddressError{Host: host, Err: err}
		}
	}
	raw.SetDeadline(time.Time{})
	drain := d.DrainTimeout
	if drain <= 0 {
		drain = 5 * time.Second
	}
	limit := d.MaxSessionBytes
	if limit <= 0 {
		limit = 256 << 20
	}
	capture := newCaptureConn(raw, drain, limit)
	keys := &keyLog{}
	cfg := d.tlsConfig(host, keys)
	tc := tls.Client(capture, cfg)
	s := &Session{d: d, id: id, host: strings.ToLower(host), addr: dialled, dialed: d.now(), capture: capture, conn: tc, keys: keys}
	d.mu.Lock()
	d.sessions = append(d.sessions, s)
	d.mu.Unlock()
	if err := tc.HandshakeContext(ctx); err != nil {
		tc.Close()
		s.fail(fmt.Errorf("%w: tls handshake: %w", ErrIncomplete, err))
		return nil, fmt.Errorf("prover: tls handshake with %s via notary: %w", addr, err)
	}
	if err := s.start(); err != nil {
		tc.Close()
		s.fail(err)
		return nil, err
	}
	return tc, nil
}

func (d *Dialer) tlsConfig(host string, keys *keyLog) *tls.Config {
	var cfg *tls.Config
	if d.TLSConfig != nil {
		cfg = d.TLSConfig.Clone()
	} else {
		cfg = &tls.Config{}
	}
	cfg.ServerName = host
	if cfg.MinVersion < tls.VersionTLS12 {
		cfg.MinVersion = tls.VersionTLS12
	}
	var suites []uint16
	for _, s := range cfg.CipherSuites {
		for _, a := range aeadSuites12 {
			if s == a {
				suites = append(suites, s)
			}
		}
	}
	if len(suites) == 0 {
		suites = aeadSuites12
	}
	cfg.CipherSuites = suites
	cfg.ClientSessionCache = nil
	cfg.SessionTicketsDisabled = true
	cfg.Renegotiation = tls.RenegotiateNever
	cfg.NextProtos = []string{"http/1.1"}
	cfg.KeyLogWriter = keys
	cfg.InsecureSkipVerify = false
	return cfg
}

// maxConnectResponse bounds the notary's CONNECT response.
const maxConnectResponse = 16 << 10

// connect sends the CONNECT request and reads the notary's answer,
// returning the session id and the address the notary says it dialled
// ("" when it does not say).
func connect(c net.Conn, addr string) (string, string, error) {
	id, resp, err := connectResponse(c, addr)
	if err != nil {
		return "", "", err
	}
	return id, resp.Header.Get(notary.AddressHeader), nil
}

func connectResponse(c net.Conn, addr string) (string, *http.Response, error) {
	req := "CONNECT " + addr + " HTTP/1.1\r\nHost: " + addr + "\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		return "", nil, fmt.Errorf("%w: connect: %w", ErrNotary, err)
	}
	// The notary sends nothing after its response until the server does,
	// and the server speaks only after our ClientHello: reading through
	// a buffer cannot swallow tunnel bytes, which the check below asserts.
	br := bufio.NewReaderSize(io.LimitReader(c, maxConnectResponse), 4096)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return "", nil, fmt.Errorf("%w: connect response: %w", ErrNotary, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", nil, problemError(resp)
	}
	if br.Buffered() != 0 {
		return "", nil, fmt.Errorf("%w: tunnel data before the client hello", ErrNotary)
	}
	id := resp.Header.Get(notary.SessionHeader)
	if b, err := hex.DecodeString(id); err != nil || len(b) != 16 {
		return "", nil, fmt.Errorf("%w: connect response has no valid session id", ErrNotary)
	}
	return id, resp, nil
}

// problemError turns a non-success notary response into a *NotaryError.
func problemError(resp *http.Response) error {
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	var p notary.Problem
	e := &NotaryError{Status: resp.StatusCode}
	if json.Unmarshal(body, &p) == nil {
		e.Type, e.Detail = p.Type, p.Detail
	}
	if len(e.Detail) > 512 {
		e.Detail = e.Detail[:512]
	}
	return e
}

// forget drops a finalized session from the dialer's list.
func (d *Dialer) forget(s *Session) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, x := range d.sessions {
		if x == s {
			d.sessions = append(d.sessions[:i], d.sessions[i+1:]...)
			return
		}
	}
}

// FinalizeAll finalizes every session not yet finalized, in dial order.
// It returns the results of the sessions that succeeded and the first
// error. Close the connections (http.Transport.CloseIdleConnections)
// first: Finalize waits for a session's connection to close.
func (d *Dialer) FinalizeAll(ctx context.Context) ([]*Result, error) {
	var out []*Result
	var first error
	for _, s := range d.Sessions() {
		r, err := s.Finalize(ctx)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		out = append(out, r)
	}
	return out, first
}

// Session is one notarized TLS connection.
type Session struct {
	d       *Dialer
	id      string
	host    string
	addr    string // the address the notary reported it dialled, "" if none
	dialed  time.Time
	capture *captureConn
	conn    *tls.Conn
	keys    *keyLog

	// Set up after the handshake by start, then owned by the check
	// goroutine until verified is closed.
	state    tls.ConnectionState
	skeys    serverKeys
	chk      *checker
	chkErr   error
	verified chan struct{}

	once   sync.Mutex
	done   bool
	result *Result
	err    error
}

// start derives the server keys from the key log once the handshake is
// complete and starts checking records as they stream in: every server
// record is authenticated while the session runs (and every record's
// Merkle leaf hash is computed as it is captured), so Finalize has little
// left to do.
func (s *Session) start() error {
	st := s.conn.ConnectionState()
	suite, err := mpctls.SuiteByID(st.CipherSuite)
	if err != nil {
		return err
	}
	keys := serverKeys{suite: suite}
	switch st.Version {
	case tls.VersionTLS13:
		keys.handshake = s.keys.get(labelServerHandshake)
		keys.appSecret0 = s.keys.get(labelServerTraffic0)
		if keys.handshake == nil || keys.appSecret0 == nil {
			return fmt.Errorf("%w: tls 1.3 secrets missing from the key log", ErrIncomplete)
		}
	case tls.VersionTLS12:
		client, server := s.capture.records()
		master := s.keys.get(labelClientRandom)
		if master == nil {
			return fmt.Errorf("%w: tls 1.2 master secret missing from the key log", ErrIncomplete)
		}
		defer clear(master)
		cr, err := helloRandom(client, hsClientHello)
		if err != nil {
			return err
		}
		sr, err := helloRandom(server, hsServerHello)
		if err != nil {
			return err
		}
		if keys.key12, keys.iv12, err = mpctls.ServerWriteKey12(suite, master, cr, sr); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: tls version %#04x", mpctls.ErrUnsupported, st.Version)
	}
	// The key log has served its purpose: forget the client secrets now.
	s.keys.wipe()
	chk, err := newChecker(keys, st.Version == tls.VersionTLS13)
	if err != nil {
		return err
	}
	s.state, s.skeys, s.chk = st, keys, chk
	s.verified = make(chan struct{})
	go s.check()
	return nil
}

// check processes captured records until the connection has closed.
func (s *Session) check() {
	defer close(s.verified)
	next := 0
	for {
		var closed bool
		select {
		case <-s.capture.closed:
			closed = true
		default:
		}
		_, server := s.capture.records()
		for ; next < len(server) && s.chkErr == nil; next++ {
			s.chkErr = s.chk.add(server[next])
		}
		if closed {
			return
		}
		select {
		case <-s.capture.notify:
		case <-s.capture.closed:
		}
	}
}

// ID returns the notary's id for the session.
func (s *Session) ID() string { return s.id }

// Host returns the server name the session was opened for.
func (s *Session) Host() string { return s.host }

func (s *Session) fail(err error) {
	s.once.Lock()
	defer s.once.Unlock()
	if !s.done {
		s.done, s.err = true, err
		s.keys.wipe()
		s.d.forget(s)
	}
}

// Finalize waits until the session's connection is closed, discloses to
// the notary what it needs (TLS 1.3: the server handshake traffic secret;
// TLS 1.2: nothing) and the record counts, and verifies the statement it
// returns: signed by a trusted key, for this session, host and time, with
// a Merkle root and counts equal to those of the records the prover saw.
// It also authenticates every server record under the server traffic
// keys. The first call does the work; later calls return its outcome.
func (s *Session) Finalize(ctx context.Context) (*Result, error) {
	select {
	case <-s.capture.closed:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: connection still open: %w", ErrIncomplete, ctx.Err())
	}
	s.once.Lock()
	defer s.once.Unlock()
	if s.done {
		return s.result, s.err
	}
	s.result, s.err = s.finalize(ctx)
	s.done = true
	s.keys.wipe()
	s.d.forget(s)
	return s.result, s.err
}

func (s *Session) finalize(ctx context.Context) (*Result, error) {
	client, server, err := s.capture.snapshot()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIncomplete, err)
	}
	if s.chk == nil {
		return nil, fmt.Errorf("%w: handshake not complete", ErrIncomplete)
	}
	<-s.verified
	if s.chkErr != nil {
		return nil, s.chkErr
	}
	rep, err := s.chk.finish()
	if err != nil {
		return nil, err
	}
	st, keys := s.state, s.skeys
	req := notary.FinalizeRequest{ClientRecords: uint64(len(client)), ServerRecords: uint64(len(server))}
	if st.Version == tls.VersionTLS13 {
		req.ServerHandshakeTrafficSecret = keys.handshake
	}

	resp, err := s.post(ctx, req)
	if err != nil {
		return nil, err
	}
	skew := s.d.ClockSkew
	if skew <= 0 {
		skew = 2 * time.Minute
	}
	stmt, err := mpctls.VerifyStatement(resp.Statement, s.d.NotaryKeys, mpctls.Expect{
		SNI: s.host, NotBefore: s.dialed.Add(-skew), NotAfter: s.d.now().Add(skew),
	})
	if err != nil {
		return nil, err
	}
	if hex.EncodeToString(stmt.SessionID[:]) != s.id {
		return nil, fmt.Errorf("%w: statement is for session %x", ErrMismatch, stmt.SessionID)
	}
	if s.d.AllowAddr != nil && stmt.Address != s.addr {
		return nil, fmt.Errorf("%w: the statement names another address than the notary reported when it dialled", ErrMismatch)
	}
	if stmt.Version != st.Version || stmt.CipherSuite != st.CipherSuite {
		return nil, fmt.Errorf("%w: statement says version %#04x suite %#04x", ErrMismatch, stmt.Version, stmt.CipherSuite)
	}
	if err := checkChainDigest(stmt, st); err != nil {
		return nil, err
	}
	records, err := mpctls.Interleave(client, server, resp.Order)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMismatch, err)
	}
	if uint64(len(client)) != stmt.ClientRecords || uint64(len(server)) != stmt.ServerRecords ||
		wireBytes(client) != stmt.ClientBytes || wireBytes(server) != stmt.ServerBytes {
		return nil, fmt.Errorf("%w: record or byte counts differ", ErrMismatch)
	}
	if s.root(records) != stmt.Root {
		if full, err := transcriptRoot(records); err != nil || full != stmt.Root {
			return nil, fmt.Errorf("%w: merkle root differs from the records the prover saw", ErrMismatch)
		}
	}
	return &Result{
		SessionID:   s.id,
		Host:        s.host,
		Statement:   resp.Statement,
		Parsed:      stmt,
		Records:     records,
		KeyUpdates:  rep.keyUpdates,
		Tickets:     rep.tickets,
		AppRecords:  len(rep.appSeqs),
		AppBytes:    rep.appBytes,
		CloseNotify: rep.closeNotify,
		keys:        keys,
		epochs:      rep.epochStarts,
		appSeqs:     rep.appSeqs,
		lastSeq:     uint64(len(server)) - 1,
	}, nil
}

// wireBytes sums the wire sizes of records.
func wireBytes(rs []mpctls.Record) uint64 {
	var n uint64
	for _, r := range rs {
		n += uint64(len(r.Raw))
	}
	return n
}

// root computes the Merkle root over records (in leaf order) from the leaf
// hashes the capture computed while the session ran. It builds
// the same tree as mpctls.Transcript: RFC 6962, node = SHA-256(0x01 ‖ left
// ‖ right). Should it disagree with a statement, Finalize asks the
// authoritative mpctls.Transcript before declaring a mismatch.
func (s *Session) root(records []mpctls.Record) [32]byte {
	leaves := s.capture.leaves()
	type sub struct {
		h    [32]byte
		size uint64
	}
	var stack []sub
	var buf [65]byte
	buf[0] = 0x01
	node := func(l, r [32]byte) [32]byte {
		copy(buf[1:], l[:])
		copy(buf[33:], r[:])
		return sha256.Sum256(buf[:])
	}
	for _, r := range records {
		cur := sub{leaves[r.Dir][r.Seq], 1}
		for len(stack) > 0 && stack[len(stack)-1].size == cur.size {
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			cur = sub{node(top.h, cur.h), top.size * 2}
		}
		stack = append(stack, cur)
	}
	var root [32]byte
	if len(stack) > 0 {
		root = stack[len(stack)-1].h
		for i := len(stack) - 2; i >= 0; i-- {
			root = node(stack[i].h, root)
		}
	}
	return root
}

// transcriptRoot is the authoritative root of records in leaf order.
func transcriptRoot(records []mpctls.Record) ([32]byte, error) {
	var tr mpctls.Transcript
	for _, r := range records {
		if err := tr.Add(r); err != nil {
			return [32]byte{}, err
		}
	}
	return tr.Root(), nil
}

// checkChainDigest compares the statement's certificate chain digest with
// the chain the prover's TLS stack verified.
func checkChainDigest(stmt *mpctls.Statement, st tls.ConnectionState) error {
	if mpctls.CertChainDigest(st.PeerCertificates) != stmt.CertChainDigest {
		return fmt.Errorf("%w: certificate chain digest differs", ErrMismatch)
	}
	return nil
}

// maxFinalizeResponse bounds the notary's finalize answer.
const maxFinalizeResponse = 64 << 10

func (s *Session) post(ctx context.Context, req notary.FinalizeRequest) (*notary.FinalizeResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.d.Notary+notary.FinalizePath(s.id), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotary, err)
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := s.d.controlClient().Do(hr)
	if err != nil {
		return nil, fmt.Errorf("%w: finalize: %w", ErrNotary, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, problemError(resp)
	}
	defer resp.Body.Close()
	var out notary.FinalizeResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxFinalizeResponse)).Decode(&out); err != nil {
		return nil, fmt.Errorf("%w: finalize response: %w", ErrNotary, err)
	}
	return &out, nil
}

// Result is a finalized, verified notarized session.
type Result struct {
	SessionID string            // the notary's session id
	Host      string            // server name
	Statement []byte            // the signed statement (COSE_Sign1)
	Parsed    *mpctls.Statement // the verified statement
	// Records are all records of the session in Merkle leaf order, as
	// needed for inclusion proofs.
	Records    []mpctls.Record
	KeyUpdates int // KeyUpdate messages the server sent
	Tickets    int // NewSessionTicket messages the server sent
	AppRecords int // server application_data records
	AppBytes   int // server application data plaintext bytes
	// CloseNotify reports that the server ended the session with a
	// close_notify alert. Without one, the end of the server's stream is
	// not authenticated: rely on HTTP framing (Content-Length, chunked
	// terminator) to know a response is whole.
	CloseNotify bool

	keys    serverKeys
	epochs  []uint64 // server sequence numbers where key epochs start
	appSeqs []uint64 // server records carrying application data
	lastSeq uint64   // last server record
}

// ApplicationRecords returns the sequence numbers of the server records
// that carry application data (the HTTP responses), in order.
func (r *Result) ApplicationRecords() []uint64 { return append([]uint64(nil), r.appSeqs...) }

// Presentation builds a presentation of the server records whose
// sequence numbers are in selected: it discloses the server traffic
// secret (TLS 1.3: of the first application epoch; TLS 1.2: the server
// write key and IV) and the chosen records with their inclusion proofs,
// never anything of the client direction. Records left out stay proven
// present by the Merkle root. Pass ApplicationRecords() to disclose every
// response, or use PresentAll.
func (r *Result) Presentation(selected []uint64) (*mpctls.Presentation, error) {
	var secret []byte
	if r.Parsed.Version == mpctls.VersionTLS13 {
		secret = r.keys.appSecret0
	} else {
		secret = append(append([]byte(nil), r.keys.key12...), r.keys.iv12...)
	}
	return mpctls.BuildPresentation(r.Records, r.Statement, secret, r.epochs, selected)
}

// PresentAll builds the presentation of every protected server record
// after the handshake, up to the end of the session (its close_notify
// included when the server sent one), which verifies as Complete.
func (r *Result) PresentAll() (*mpctls.Presentation, error) {
	var sel []uint64
	for q := r.epochs[0]; q <= r.lastSeq; q++ {
		sel = append(sel, q)
	}
	return r.Presentation(sel)
}
