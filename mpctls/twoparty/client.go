package twoparty

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/acds-project/acds/mpctls"
)

// Config configures the prover's side of an MPC-mode session.
type Config struct {
	// ServerName is the portal's DNS name: the ClientHello's server_name
	// and the name the certificate must be valid for. Required.
	ServerName string
	// RootCAs verify the server's certificate chain. Nil means the system
	// roots.
	RootCAs *x509.CertPool
	// Time is the clock for certificate validity. Nil means time.Now.
	Time func() time.Time
	// MinVersion and MaxVersion bound the TLS versions offered (1.2 and
	// 1.3 only). Zero means 1.2 and 1.3.
	MinVersion, MaxVersion uint16
	// Suites are the cipher suites offered, in order of preference, of
	// those Supported reports; nil means all of them (TLS 1.3's
	// AES-128-GCM first). A suite MPC mode does not compute is refused.
	Suites []uint16
	// SessionID is the notary's id of the session, which its checkpoints
	// name.
	SessionID [16]byte
	// NotaryKeys verify the notary's checkpoints. Required: with none,
	// no server record can be read.
	NotaryKeys []ed25519.PublicKey
	// KeyUpdateTimeout bounds how long a read waits for the server's
	// answer to a KeyUpdate before it ends the session's server direction
	// instead (TLS 1.3). Zero means 10 seconds.
	KeyUpdateTimeout time.Duration
	// QuietTimeout is how long a TLS 1.2 read waits, after the last
	// server record, for the server to end its direction before asking
	// the notary to cut it (TLS 1.2 reveals the server key only once the
	// server can send nothing more). Zero means 2 seconds.
	QuietTimeout time.Duration
	// DrainTimeout bounds how long Close waits for the server's direction
	// to end after the client's has. Zero means 5 seconds.
	DrainTimeout time.Duration
	// MaxServerBytes bounds the server records held before they are
	// read. Zero means 256 MiB.
	MaxServerBytes int64
	// Rand is the source of the client random. Nil means crypto/rand.
	Rand io.Reader
}

// State describes an established session.
type State struct {
	Version     uint16
	CipherSuite uint16
	ServerName  string
	// Handshake is the server identity check the client ran
	// (mpctls.VerifyHandshake): certificates, signature scheme, and for
	// TLS 1.3 the transcript hash.
	Handshake *mpctls.Handshake
}

// Secrets are what the prover holds once a session is finished: enough
// to check every server record and to build presentations, never a
// client-direction key.
type Secrets struct {
	// ServerHandshakeTrafficSecret is SHTS (TLS 1.3).
	ServerHandshakeTrafficSecret []byte
	// ServerSecret is as mpctls.Presentation.Secret: SATS₀ for TLS 1.3,
	// the server write key and IV for TLS 1.2.
	ServerSecret []byte
	// Checkpoints are the notary's signed checkpoints, one per epoch it
	// revealed during the session, in order.
	Checkpoints []*mpctls.Checkpoint
}

// Conn is the prover's side of an MPC-mode TLS session: a TLS 1.3 or 1.2
// client whose ECDHE secret and key schedule are computed with the
// notary, so that it never holds the server's application keys before
// the notary has committed to the records they protect. It is a net.Conn
// over the tunnel the notary relays; Handshake runs the handshake (Read
// and Write run it first if needed).
type Conn struct {
	tunnel net.Conn
	e      engine
	m      Messages
	cfg    Config

	hsOnce sync.Once
	hsErr  error
	inHS   bool // the handshake is running: client records go to cliHS
	state  State
	suite  mpctls.Suite
	ks13   *schedule13
	ks12   *schedule12
	shts   []byte
	key12  []byte          // the server write key and IV once revealed (TLS 1.2)
	cliHS  []mpctls.Record // client records of the handshake

	// mpcMu serializes the use of the engine (reads' reveals, the
	// background derivation of the next epoch, Finish).
	mpcMu sync.Mutex

	// Write side.
	wmu     sync.Mutex
	wseal   *mpctls.Sealer
	wseq    uint64
	wsecret []byte // the client's current application traffic secret (TLS 1.3)
	wcount  uint64 // records sent, for Seq
	closed  bool

	// Records the read loop received.
	mu       sync.Mutex
	srv      []mpctls.Record // every server record; consumed ones have no Raw
	srvBytes int64
	srvEnd   error // why the server direction ended (io.EOF when cleanly)
	changed  chan struct{}
	deadline time.Time
	loopDone chan struct{}

	// The reader's state.
	rmu    sync.Mutex
	next   uint64 // the next server record to read
	plain  []byte // decrypted application data not yet returned
	rerr   error
	epochs []uint64 // start of each server key epoch (the first: ServerProtectedFrom)
	opener *mpctls.Opener
	kuFor  int // the epoch a KeyUpdate was requested for, or -1
	kuAt   uint64
	// endsAt is the server record the current epoch was revealed to end
	// at (its KeyUpdate), or -1 when it was revealed at the end of the
	// server direction.
	endsAt int64
	cut    bool // the server direction was revealed at its end: nothing more comes
	points []*mpctls.Checkpoint

	// Server epoch keys: derived in the engine and revealed so far, and
	// the background derivation of the next, when running.
	dmu      sync.Mutex
	derived  int
	revealed int
	derive   chan error

	secrets   *Secrets
	finishErr error
}

// newConn makes the client over tunnel, with the prover's side of a
// two-party session e.
func newConn(tunnel net.Conn, e engine, m Messages, cfg Config) *Conn {
	if cfg.Time == nil {
		cfg.Time = time.Now
	}
	if cfg.MinVersion == 0 {
		cfg.MinVersion = mpctls.VersionTLS12
	}
	if cfg.MaxVersion == 0 {
		cfg.MaxVersion = mpctls.VersionTLS13
	}
	if cfg.KeyUpdateTimeout <= 0 {
		cfg.KeyUpdateTimeout = 10 * time.Second
	}
	if cfg.QuietTimeout <= 0 {
		cfg.QuietTimeout = 2 * time.Second
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 5 * time.Second
	}
	if cfg.MaxServerBytes <= 0 {
		cfg.MaxServerBytes = 256 << 20
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	c := &Conn{tunnel: tunnel, e: e, m: m, cfg: cfg, changed: make(chan struct{}), loopDone: make(chan struct{}), kuFor: -1, endsAt: -1}
	go c.readLoop()
	return c
}

// readLoop receives the server's records from the tunnel.
func (c *Conn) readLoop() {
	defer close(c.loopDone)
	rr := mpctls.NewRecordReader(c.tunnel, mpctls.ServerToClient)
	for {
		rec, err := rr.Next()
		c.mu.Lock()
		if err == nil {
			c.srvBytes += int64(len(rec.Raw))
			if c.srvBytes > c.cfg.MaxServerBytes {
				err = fmt.Errorf("%w: more than %d bytes of server records held", mpctls.ErrTooLarge, c.cfg.MaxServerBytes)
			} else {
				c.srv = append(c.srv, rec)
			}
		}
		if err != nil {
			c.srvEnd = err
		}
		close(c.changed)
		c.changed = make(chan struct{})
		c.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// errWaited reports that a wait's own time limit passed (the read
// deadline gives os.ErrDeadlineExceeded instead).
var errWaited = errors.New("twoparty: wait over")

// waitServer blocks until cond holds on the server records (called with
// c.mu held), the server direction has ended (its error: io.EOF when
// cleanly), ctx is done, until passes (errWaited) or the read deadline
// passes (os.ErrDeadlineExceeded).
func (c *Conn) waitServer(ctx context.Context, until time.Time, cond func(srv []mpctls.Record) bool) ([]mpctls.Record, error) {
	for {
		c.mu.Lock()
		srv, end, changed, rd := c.srv, c.srvEnd, c.changed, c.deadline
		ok := cond(srv)
		c.mu.Unlock()
		if ok {
			return srv, nil
		}
		if end != nil {
			return srv, end
		}
		now := time.Now()
		if !rd.IsZero() && !now.Before(rd) {
			return srv, os.ErrDeadlineExceeded
		}
		if !until.IsZero() && !now.Before(until) {
			return srv, errWaited
		}
		next := until
		if !rd.IsZero() && (next.IsZero() || rd.Before(next)) {
			next = rd
		}
		var timer *time.Timer
		var fire <-chan time.Time
		if !next.IsZero() {
			timer = time.NewTimer(time.Until(next))
			fire = timer.C
		}
		select {
		case <-changed:
		case <-fire:
		case <-ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
		if err := ctx.Err(); err != nil {
			return srv, err
		}
	}
}

// ask sends a request to the notary and reads its answer.
func (c *Conn) ask(ctx context.Context, r request) (answer, error) {
	if err := c.m.Send(ctx, r.marshal()); err != nil {
		return answer{}, err
	}
	b, err := c.m.Recv(ctx, maxMessage)
	if err != nil {
		return answer{}, err
	}
	a, err := parseAnswer(b)
	if err != nil {
		return answer{}, err
	}
	if !a.ok {
		return answer{}, &RefusedError{Reason: a.reason}
	}
	return a, nil
}

// writeRecord sends one plaintext record (the hellos' phase).
func (c *Conn) writePlain(typ uint8, version uint16, frag []byte) error {
	raw := make([]byte, 0, mpctls.HeaderLen+len(frag))
	raw = append(raw, typ, byte(version>>8), byte(version), byte(len(frag)>>8), byte(len(frag)))
	raw = append(raw, frag...)
	return c.writeRaw(raw)
}

func (c *Conn) writeRaw(raw []byte) error {
	rec := mpctls.Record{Dir: mpctls.ClientToServer, Seq: c.wcount, Type: raw[0], Version: uint16(raw[1])<<8 | uint16(raw[2]), Raw: raw}
	if _, err := c.tunnel.Write(raw); err != nil {
		return err
	}
	c.wcount++
	if c.inHS {
		c.cliHS = append(c.cliHS, rec)
	}
	return nil
}

// Handshake runs the TLS handshake with the notary's help, once; later
// calls return the first call's result.
func (c *Conn) Handshake(ctx context.Context) error {
	c.hsOnce.Do(func() {
		c.wmu.Lock()
		c.inHS = true
		c.wmu.Unlock()
		c.hsErr = c.handshake(ctx)
		c.wmu.Lock()
		c.inHS = false
		c.wmu.Unlock()
		if c.hsErr != nil {
			c.tunnel.Close()
			c.e.Close()
		}
	})
	return c.hsErr
}

func (c *Conn) handshake(ctx context.Context) error {
	if c.cfg.ServerName == "" {
		return errors.New("twoparty: no server name")
	}
	if c.cfg.MinVersion < mpctls.VersionTLS12 || c.cfg.MaxVersion > mpctls.VersionTLS13 || c.cfg.MinVersion > c.cfg.MaxVersion {
		return fmt.Errorf("%w: versions %#04x..%#04x", mpctls.ErrUnsupported, c.cfg.MinVersion, c.cfg.MaxVersion)
	}
	share, err := c.e.KeyShare(ctx)
	if err != nil {
		return err
	}
	random := make([]byte, 32)
	if _, err := io.ReadFull(c.cfg.Rand, random); err != nil {
		return err
	}
	suites := c.cfg.Suites
	if suites == nil {
		suites = append(append([]uint16(nil), suites13...), suites12...)
	}
	for _, s := range suites {
		if !Supported(mpctls.VersionTLS13, s) && !Supported(mpctls.VersionTLS12, s) {
			return fmt.Errorf("%w: suite %#04x is not computed in mpc mode", ErrUnsupported, s)
		}
	}
	ch := clientHello(random, c.cfg.ServerName, share, suites, c.cfg.MinVersion, c.cfg.MaxVersion)
	if err := c.writePlain(mpctls.RecordHandshake, 0x0301, ch); err != nil {
		return err
	}
	var kx *mpctls.KeyExchange
	if _, err := c.waitServer(ctx, time.Time{}, func(srv []mpctls.Record) bool {
		kx, err = mpctls.ParseKeyExchange(append(append([]mpctls.Record(nil), c.cliHS...), srv...))
		return !errors.Is(err, mpctls.ErrTruncated)
	}); err != nil {
		return fmt.Errorf("twoparty: waiting for the server hello: %w", err)
	}
	if err != nil {
		if alert := serverAlert(err); alert != "" {
			// A server that accepts none of the suites or groups MPC mode
			// offers answers the hello with a handshake failure.
			return fmt.Errorf("%w: the server refused the hello (%s): %w", ErrUnsupported, alert, err)
		}
		return err
	}
	if kx.HelloRetry {
		return fmt.Errorf("%w: the server asks for group %d", ErrUnsupported, kx.Group)
	}
	if kx.Group != groupP256 {
		return fmt.Errorf("%w: group %d", ErrUnsupported, kx.Group)
	}
	if !Supported(kx.Version, kx.CipherSuite) {
		return fmt.Errorf("%w: suite %#04x", ErrUnsupported, kx.CipherSuite)
	}
	if c.suite, err = mpctls.SuiteByID(kx.CipherSuite); err != nil {
		return err
	}
	c.state.Version, c.state.CipherSuite, c.state.ServerName = kx.Version, kx.CipherSuite, c.cfg.ServerName
	if kx.Version == mpctls.VersionTLS13 {
		return c.handshake13(ctx, kx)
	}
	if !kx.ExtendedMasterSecret {
		return fmt.Errorf("%w: tls 1.2 without the extended master secret", ErrUnsupported)
	}
	return c.handshake12(ctx, kx, share)
}

// serverAlert names the alert a server answered the ClientHello with when
// it means "nothing offered is acceptable", or "".
func serverAlert(err error) string {
	var ae *mpctls.AlertError
	if !errors.As(err, &ae) || ae.Dir != mpctls.ServerToClient {
		return ""
	}
	switch ae.Description {
	case 40:
		return "handshake_failure"
	case 70:
		return "protocol_version"
	case 71:
		return "insufficient_security"
	}
	return ""
}

func (c *Conn) handshakeOptions() mpctls.HandshakeOptions {
	roots := c.cfg.RootCAs
	if roots == nil {
		roots, _ = x509.SystemCertPool()
		if roots == nil {
			roots = x509.NewCertPool()
		}
	}
	return mpctls.HandshakeOptions{Roots: roots, SNI: c.cfg.ServerName, Now: c.cfg.Time()}
}

func (c *Conn) handshake13(ctx context.Context, kx *mpctls.KeyExchange) error {
	if _, err := c.ask(ctx, request{kind: reqServerHello}); err != nil {
		return err
	}
	pms, err := c.e.ECDH(ctx, kx.ServerShare)
	if err != nil {
		return err
	}
	c.ks13 = newSchedule13(c.e, prover, c.suite.KeyLen)
	chts, shts, err := c.ks13.handshake(ctx, pms, transcriptHash(kx.Messages...))
	if err != nil {
		return err
	}
	c.shts = shts
	// The master secret does not depend on the server's flight: derive it
	// while the flight arrives.
	masterDone := make(chan error, 1)
	go func() { masterDone <- c.ks13.master(ctx) }()
	var hs *mpctls.Handshake
	opts := c.handshakeOptions()
	_, werr := c.waitServer(ctx, time.Time{}, func(srv []mpctls.Record) bool {
		hs, err = mpctls.VerifyHandshake(append(append([]mpctls.Record(nil), c.cliHS...), srv...), mpctls.Disclosure{ServerHandshakeTrafficSecret: shts}, opts)
		return !errors.Is(err, mpctls.ErrTruncated)
	})
	if merr := <-masterDone; merr != nil {
		return merr
	}
	if werr != nil {
		return fmt.Errorf("twoparty: waiting for the server's flight: %w", werr)
	}
	if err != nil {
		return err
	}
	c.state.Handshake = hs
	// Client Finished under the client handshake keys.
	fk, err := mpctls.HKDFExpandLabel(crypto256, chts, "finished", nil, 32)
	if err != nil {
		return err
	}
	m := hmac.New(sha256.New, fk)
	m.Write(hs.TranscriptHash)
	fin := append([]byte{typeFinished, 0, 0, 32}, m.Sum(nil)...)
	seal, err := mpctls.NewSealer13(c.suite, chts)
	if err != nil {
		return err
	}
	raw, err := seal.Seal(nil, 0, mpctls.RecordHandshake, fin)
	if err != nil {
		return err
	}
	if err := c.writeRaw(raw); err != nil {
		return err
	}
	if _, err := c.ask(ctx, request{kind: reqServerFlight}); err != nil {
		return err
	}
	cats, err := c.ks13.application(ctx, nil)
	if err != nil {
		return err
	}
	if err := c.ks13.epochKeys(ctx); err != nil {
		return err
	}
	c.wsecret = cats
	if c.wseal, err = mpctls.NewSealer13(c.suite, cats); err != nil {
		return err
	}
	c.next = hs.ServerProtectedFrom
	c.epochs = []uint64{hs.ServerProtectedFrom}
	c.derived = 1
	return nil
}

func (c *Conn) handshake12(ctx context.Context, kx *mpctls.KeyExchange, share []byte) error {
	// The client flight's first part: ClientKeyExchange and
	// ChangeCipherSpec. The Finished needs the key block.
	cke := append([]byte{16, 0, 0, byte(len(share) + 1), byte(len(share))}, share...)
	if err := c.writePlain(mpctls.RecordHandshake, mpctls.VersionTLS12, cke); err != nil {
		return err
	}
	if err := c.writePlain(mpctls.RecordChangeCipherSpec, mpctls.VersionTLS12, []byte{1}); err != nil {
		return err
	}
	if _, err := c.ask(ctx, request{kind: reqClientKeyExchange}); err != nil {
		return err
	}
	pms, err := c.e.ECDH(ctx, kx.ServerShare)
	if err != nil {
		return err
	}
	c.ks12 = newSchedule12(c.e, prover)
	msgs := append(append([][]byte(nil), kx.Messages...), cke)
	sessionHash := transcriptHash(msgs...)
	if err := c.ks12.master(ctx, pms, sessionHash); err != nil {
		return err
	}
	ckey, cvd, err := c.ks12.keys(ctx, kx.ClientRandom, kx.ServerRandom, sessionHash)
	if err != nil {
		return err
	}
	fin := append([]byte{typeFinished, 0, 0, 12}, cvd...)
	civ, err := c.ks12.keys2(ctx, transcriptHash(append(msgs, fin)...))
	if err != nil {
		return err
	}
	if c.wseal, err = mpctls.NewSealer12(c.suite, ckey, civ); err != nil {
		return err
	}
	raw, err := c.wseal.Seal(nil, 0, mpctls.RecordHandshake, fin)
	if err != nil {
		return err
	}
	c.wseq = 1
	if err := c.writeRaw(raw); err != nil {
		return err
	}
	// The server's ChangeCipherSpec and Finished, then the identity check
	// (certificate chain, ServerKeyExchange signature) and the Finished
	// check in two-party computation, before any application data.
	var hs *mpctls.Handshake
	opts := c.handshakeOptions()
	srv, werr := c.waitServer(ctx, time.Time{}, func(srv []mpctls.Record) bool {
		hs, err = mpctls.VerifyHandshake(append(append([]mpctls.Record(nil), c.cliHS...), srv...), mpctls.Disclosure{}, opts)
		return !errors.Is(err, mpctls.ErrTruncated) && (err != nil || uint64(len(srv)) > hs.ServerProtectedFrom)
	})
	if werr != nil {
		return fmt.Errorf("twoparty: waiting for the server's finished: %w", werr)
	}
	if err != nil {
		return err
	}
	c.state.Handshake = hs
	if fr := srv[hs.ServerProtectedFrom]; fr.Type != mpctls.RecordHandshake || len(fr.Raw) != mpctls.HeaderLen+8+16+16 {
		return fmt.Errorf("%w: the server's first protected record is not a finished message", mpctls.ErrHandshake)
	}
	if _, err := c.ask(ctx, request{kind: reqServerFinished}); err != nil {
		return err
	}
	ok, err := c.ks12.serverFinished(ctx, nil)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: the server finished does not verify", mpctls.ErrFinished)
	}
	c.next = hs.ServerProtectedFrom + 1
	c.epochs = []uint64{hs.ServerProtectedFrom}
	return nil
}

// ConnectionState returns the session's parameters once the handshake is
// done.
func (c *Conn) ConnectionState() State { return c.state }

// Write sends application data (after the handshake).
func (c *Conn) Write(p []byte) (int, error) {
	if err := c.Handshake(context.Background()); err != nil {
		return 0, err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	c.rmu.Lock()
	cut := c.cut
	c.rmu.Unlock()
	if cut {
		return 0, fmt.Errorf("twoparty: the server's direction has ended: %w", net.ErrClosed)
	}
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), mpctls.MaxPlaintext)]
		raw, err := c.wseal.Seal(nil, c.wseq, mpctls.RecordApplicationData, chunk)
		if err != nil {
			return n, err
		}
		if err := c.writeRaw(raw); err != nil {
			return n, err
		}
		c.wseq++
		n += len(chunk)
		p = p[len(chunk):]
	}
	c.prepareNextEpoch()
	return n, nil
}

// sendKeyUpdate sends a KeyUpdate and moves the client's write keys on
// (TLS 1.3). c.wmu must be held.
func (c *Conn) sendKeyUpdate(requested bool) error {
	flag := byte(0)
	if requested {
		flag = 1
	}
	raw, err := c.wseal.Seal(nil, c.wseq, mpctls.RecordHandshake, []byte{typeKeyUpdate, 0, 0, 1, flag})
	if err != nil {
		return err
	}
	if err := c.writeRaw(raw); err != nil {
		return err
	}
	if c.wsecret, err = mpctls.NextTrafficSecret(c.suite, c.wsecret); err != nil {
		return err
	}
	if c.wseal, err = mpctls.NewSealer13(c.suite, c.wsecret); err != nil {
		return err
	}
	c.wseq = 0
	return nil
}

const typeKeyUpdate = 24

// keyUpdateRecord is the fragment length of a server record that holds
// just a KeyUpdate without padding, for every suite MPC mode offers: the
// 5-byte message, the inner content type and a 16-byte tag.
const keyUpdateRecord = 5 + 1 + 16

// prepareNextEpoch starts deriving the next server epoch's keys in the
// background when every epoch derived so far has been revealed and more
// reading is to come (a request was just written): the derivation then
// overlaps the request's trip to the server. TLS 1.3 only.
func (c *Conn) prepareNextEpoch() {
	if c.ks13 == nil {
		return
	}
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if c.derive != nil || c.revealed < c.derived {
		return
	}
	done := make(chan error, 1)
	c.derive = done
	go func() {
		c.mpcMu.Lock()
		defer c.mpcMu.Unlock()
		done <- c.deriveNext(context.Background())
	}()
}

// deriveNext derives the next server epoch's keys. c.mpcMu must be held.
func (c *Conn) deriveNext(ctx context.Context) error {
	if _, err := c.ask(ctx, request{kind: reqNextEpoch}); err != nil {
		return err
	}
	if err := c.ks13.nextEpoch(ctx); err != nil {
		return err
	}
	c.dmu.Lock()
	c.derived++
	c.dmu.Unlock()
	return nil
}

// waitDerive waits for a background derivation to end.
func (c *Conn) waitDerive() error {
	c.dmu.Lock()
	d := c.derive
	c.derive = nil
	c.dmu.Unlock()
	if d == nil {
		return nil
	}
	return <-d
}

// Read returns decrypted application data. A server record of an epoch
// whose keys the client does not hold yet starts a reveal: a KeyUpdate
// to the server (TLS 1.3) or the end of the server's direction (TLS 1.2),
// then the notary's checkpoint and the epoch's keys.
func (c *Conn) Read(p []byte) (int, error) {
	if err := c.Handshake(context.Background()); err != nil {
		return 0, err
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for {
		if len(c.plain) > 0 {
			n := copy(p, c.plain)
			c.plain = c.plain[n:]
			return n, nil
		}
		if c.rerr != nil {
			return 0, c.rerr
		}
		c.mu.Lock()
		var rec *mpctls.Record
		if c.next < uint64(len(c.srv)) {
			rec = &c.srv[c.next]
		}
		end := c.srvEnd
		c.mu.Unlock()
		switch {
		case rec != nil && c.opener != nil:
			if err := c.consume(rec); err != nil {
				c.rerr = err
			}
		case rec != nil:
			if err := c.reveal(); err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					return 0, err // the reveal resumes on the next Read
				}
				c.rerr = err
			}
		case end != nil:
			if errors.Is(end, io.EOF) {
				end = io.ErrUnexpectedEOF // no close_notify
			}
			c.rerr = end
		default:
			next := c.next
			_, err := c.waitServer(context.Background(), time.Time{}, func(srv []mpctls.Record) bool { return uint64(len(srv)) > next })
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return 0, err
			}
		}
	}
}

func (c *Conn) srvEndErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.srvEnd
}

// consume decrypts the next server record with the current epoch's keys.
// c.rmu must be held.
func (c *Conn) consume(rec *mpctls.Record) error {
	epoch := len(c.epochs) - 1
	typ, pt, err := c.opener.Open(nil, rec.Seq-c.epochs[epoch], *rec)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.srvBytes -= int64(len(rec.Raw))
	rec.Raw = nil
	c.mu.Unlock()
	c.next++
	if c.endsAt >= 0 && rec.Seq == uint64(c.endsAt) {
		// The epoch was revealed to end here: this record must be the
		// KeyUpdate that ends it.
		defer func() {
			if c.opener != nil {
				c.rerr = fmt.Errorf("%w: server record %d is not a key update", ErrEpoch, rec.Seq)
			}
		}()
	}
	switch typ {
	case mpctls.RecordApplicationData:
		c.plain = pt
	case mpctls.RecordAlert:
		if len(pt) == 2 && pt[1] == 0 {
			return io.EOF
		}
		return fmt.Errorf("twoparty: the server sent alert %x", pt)
	case mpctls.RecordHandshake:
		if c.state.Version != mpctls.VersionTLS13 {
			return fmt.Errorf("%w: a handshake message after the tls 1.2 handshake (renegotiation)", mpctls.ErrHandshake)
		}
		for len(pt) > 0 {
			if len(pt) < 4 {
				return fmt.Errorf("%w: a post-handshake message split across records", mpctls.ErrHandshake)
			}
			n := int(pt[1])<<16 | int(pt[2])<<8 | int(pt[3])
			if len(pt) < 4+n {
				return fmt.Errorf("%w: a post-handshake message split across records", mpctls.ErrHandshake)
			}
			msg := pt[:4+n]
			pt = pt[4+n:]
			switch msg[0] {
			case typeNewSessionTicket:
			case typeKeyUpdate:
				if n != 1 || len(pt) != 0 || msg[4] > 1 {
					return fmt.Errorf("%w: malformed key update", mpctls.ErrHandshake)
				}
				c.epochs = append(c.epochs, rec.Seq+1)
				c.opener = nil
				c.endsAt = -1
				if msg[4] == 1 {
					c.wmu.Lock()
					err := c.sendKeyUpdate(false)
					c.wmu.Unlock()
					if err != nil {
						return err
					}
				}
			default:
				return fmt.Errorf("%w: post-handshake message %d", mpctls.ErrHandshake, msg[0])
			}
		}
	default:
		return fmt.Errorf("%w: record of type %d", mpctls.ErrHandshake, typ)
	}
	return nil
}

const typeNewSessionTicket = 4

// reveal obtains the keys of the epoch of the next server record. c.rmu
// must be held.
func (c *Conn) reveal() error {
	epoch := len(c.epochs) - 1
	if c.ks12 != nil {
		return c.reveal12()
	}
	// The epoch ends with the server's KeyUpdate. Ask for one (once per
	// epoch) and take the first KeyUpdate-sized record after the request
	// for it; a record stream that has ended reveals at its end instead.
	if c.kuFor != epoch && c.srvEndErr() == nil {
		c.wmu.Lock()
		var err error
		if !c.closed {
			c.mu.Lock()
			c.kuAt = uint64(len(c.srv))
			c.mu.Unlock()
			err = c.sendKeyUpdate(true)
		}
		c.wmu.Unlock()
		if err != nil {
			return err
		}
		c.kuFor = epoch
	}
	var after uint64
	end := false
	from := max(c.kuAt, c.next)
	srv, err := c.waitServer(context.Background(), time.Now().Add(c.cfg.KeyUpdateTimeout), func(srv []mpctls.Record) bool {
		for i := from; i < uint64(len(srv)); i++ {
			if srv[i].Type == mpctls.RecordApplicationData && len(srv[i].Raw) == mpctls.HeaderLen+keyUpdateRecord {
				after = i
				return true
			}
		}
		return false
	})
	switch {
	case err == nil:
	case errors.Is(err, errWaited) || errors.Is(err, io.EOF):
		// No KeyUpdate came (or the server ended its direction): reveal
		// once the server direction is over, which the notary makes sure
		// of by cutting it.
		end = true
		after = uint64(len(srv))
	default:
		return err // the read deadline (the reveal resumes on the next Read), or a broken stream
	}
	return c.revealAt(epoch, after, end)
}

// reveal12 obtains the TLS 1.2 server key once the server can send
// nothing more: it waits for the server to end its direction, and after
// QuietTimeout without a record asks the notary to cut it.
func (c *Conn) reveal12() error {
	for {
		c.mu.Lock()
		n := len(c.srv)
		c.mu.Unlock()
		_, err := c.waitServer(context.Background(), time.Now().Add(c.cfg.QuietTimeout), func(srv []mpctls.Record) bool { return len(srv) > n })
		switch {
		case err == nil:
			continue // more records: wait for quiet again
		case errors.Is(err, io.EOF) || errors.Is(err, errWaited):
		default:
			return err
		}
		c.mu.Lock()
		n = len(c.srv)
		c.mu.Unlock()
		return c.revealAt(0, uint64(n), true)
	}
}

// revealAt asks the notary to reveal epoch's keys after server record
// after (or at the end of the server direction), checks its checkpoint
// and installs the keys. c.rmu must be held.
func (c *Conn) revealAt(epoch int, after uint64, end bool) error {
	if err := c.waitDerive(); err != nil {
		return err
	}
	c.mpcMu.Lock()
	defer c.mpcMu.Unlock()
	ctx := context.Background()
	c.dmu.Lock()
	have := c.derived
	c.dmu.Unlock()
	if c.ks13 != nil && epoch >= have {
		if err := c.deriveNext(ctx); err != nil {
			return err
		}
	}
	a, err := c.ask(ctx, request{kind: reqReveal, epoch: uint32(epoch), after: after, end: end})
	if err != nil {
		return err
	}
	cp, err := mpctls.VerifyCheckpoint(a.checkpoint, c.cfg.NotaryKeys)
	if err != nil {
		return err
	}
	if cp.SessionID != c.cfg.SessionID || cp.Epoch != uint32(epoch) || !end && cp.ServerRecords <= after || end && cp.ServerRecords < after {
		return fmt.Errorf("%w: checkpoint for session %x epoch %d at %d server records, asked for epoch %d after %d", ErrProtocol, cp.SessionID[:4], cp.Epoch, cp.ServerRecords, epoch, after)
	}
	var keyIV []byte
	if c.ks13 != nil {
		keyIV, err = c.ks13.revealEpoch(ctx, epoch)
	} else {
		keyIV, err = c.ks12.revealKey(ctx)
	}
	if err != nil {
		return err
	}
	if len(keyIV) != c.suite.KeyLen+ivLen(c.suite) {
		return fmt.Errorf("%w: revealed %d bytes of key and iv", ErrProtocol, len(keyIV))
	}
	key, iv := keyIV[:c.suite.KeyLen], keyIV[c.suite.KeyLen:]
	if c.ks12 != nil {
		c.key12 = keyIV
	}
	if c.ks13 != nil {
		c.opener, err = mpctls.NewOpener13Keys(c.suite, key, iv)
	} else {
		c.opener, err = mpctls.NewOpener12(c.suite, key, iv)
		c.epochs = []uint64{c.epochs[0]}
	}
	if err != nil {
		return err
	}
	c.points = append(c.points, cp)
	c.cut = c.cut || end
	c.endsAt = -1
	if !end {
		c.endsAt = int64(after)
	}
	c.dmu.Lock()
	c.revealed = epoch + 1
	c.dmu.Unlock()
	if c.ks12 != nil {
		// The TLS 1.2 Finished, sequence number 0 of the epoch, was
		// checked in two-party computation; now it can be opened too.
		c.mu.Lock()
		fin := c.srv[c.epochs[0]]
		c.mu.Unlock()
		if _, _, err := c.opener.Open(nil, 0, fin); err != nil {
			return err
		}
	}
	return nil
}

func ivLen(s mpctls.Suite) int {
	if s.Version == mpctls.VersionTLS13 {
		return 12
	}
	return s.IVLen
}

// Close sends close_notify and ends the client's direction of the
// tunnel, waits (up to DrainTimeout) for the server's direction to end,
// so that every record the notary relays reaches the client too, and
// closes the tunnel. Finish then ends the two-party computation.
func (c *Conn) Close() error {
	c.wmu.Lock()
	if c.closed {
		c.wmu.Unlock()
		return nil
	}
	c.closed = true
	if c.wseal != nil && c.hsErr == nil {
		if raw, err := c.wseal.Seal(nil, c.wseq, mpctls.RecordAlert, []byte{1, 0}); err == nil {
			c.writeRaw(raw)
			c.wseq++
		}
	}
	c.wmu.Unlock()
	if cw, ok := c.tunnel.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		t := time.NewTimer(c.cfg.DrainTimeout)
		select {
		case <-c.loopDone:
		case <-t.C:
		}
		t.Stop()
	}
	return c.tunnel.Close()
}

// Finish ends a closed session's two-party computation: the notary, now
// that nothing more can be recorded, reveals the server secret, and the
// engine's final proof runs. It returns what the prover needs to check
// every server record and build presentations. Call it once the tunnel
// is closed (after Close); it reads any server record left.
func (c *Conn) Finish(ctx context.Context) (*Secrets, error) {
	if err := c.waitDerive(); err != nil {
		return nil, err
	}
	c.mpcMu.Lock()
	defer c.mpcMu.Unlock()
	if c.secrets != nil || c.finishErr != nil {
		return c.secrets, c.finishErr
	}
	c.secrets, c.finishErr = c.finish(ctx)
	return c.secrets, c.finishErr
}

func (c *Conn) finish(ctx context.Context) (*Secrets, error) {
	if c.hsErr != nil {
		return nil, c.hsErr
	}
	defer c.e.Close()
	if _, err := c.ask(ctx, request{kind: reqFinish}); err != nil {
		return nil, err
	}
	var secret []byte
	var err error
	if c.ks13 != nil {
		secret, err = c.ks13.revealSecret(ctx)
	} else if c.key12 != nil {
		secret = c.key12
	} else {
		secret, err = c.ks12.revealKey(ctx)
	}
	if err != nil {
		return nil, err
	}
	if err := c.e.Finalize(ctx); err != nil {
		return nil, err
	}
	c.rmu.Lock()
	points := append([]*mpctls.Checkpoint(nil), c.points...)
	c.rmu.Unlock()
	return &Secrets{ServerHandshakeTrafficSecret: c.shts, ServerSecret: secret, Checkpoints: points}, nil
}

// LocalAddr returns the tunnel's local address.
func (c *Conn) LocalAddr() net.Addr { return c.tunnel.LocalAddr() }

// RemoteAddr returns the tunnel's remote address (the notary's).
func (c *Conn) RemoteAddr() net.Addr { return c.tunnel.RemoteAddr() }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.tunnel.SetWriteDeadline(t)
}

// SetReadDeadline bounds Read's waits for server records.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	return nil
}

// SetWriteDeadline bounds Write on the tunnel.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.tunnel.SetWriteDeadline(t) }
