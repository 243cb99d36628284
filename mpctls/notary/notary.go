package notary

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acds-project/acds/mpctls"
)

// Resolver looks up the addresses of a host name. *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config configures a Notary. Only Key is required; every other zero value
// is documented and usable.
type Config struct {
	// Key signs the statements. Required.
	Key ed25519.PrivateKey
	// Roots is the pool the server certificate chains are verified
	// against. Nil means the system roots.
	Roots *x509.CertPool
	// Resolver resolves CONNECT targets. Nil means net.DefaultResolver.
	Resolver Resolver
	// Dial connects to the resolved target address ("ip:port"). Nil means
	// a net.Dialer with a 10 s timeout.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// AllowAddr, when set, is asked before the notary dials a resolved
	// address; an address it refuses is never dialled, and a target left
	// with none is refused (HTTP 403, naming neither the address nor the
	// rule's reason). Nil allows every address, which suits a notary on
	// loopback next to its prover; one reachable from elsewhere should
	// refuse private and loopback ranges. This package holds no address
	// rule of its own (it imports nothing of ACDS): `acds notary` and
	// package service set portal.Guard.AllowAddrPort, the one SSRF rule.
	AllowAddr func(addr netip.AddrPort) error
	// Now is the clock of statements and certificate checks. Nil means
	// time.Now. Connection deadlines always use the real clock.
	Now func() time.Time
	// Rand is the source of session ids. Nil means crypto/rand.
	Rand io.Reader
	// SessionTimeout bounds a tunnel's whole life. Zero means 5 minutes.
	SessionTimeout time.Duration
	// DrainTimeout is how long the notary waits for one direction to end
	// once the other has ended. Zero means 5 seconds.
	DrainTimeout time.Duration
	// FinalizeTimeout is how long a closed session waits for its finalize
	// request before it is discarded. Zero means 2 minutes.
	FinalizeTimeout time.Duration
	// IdleTimeout is how long Serve keeps a connection open between two
	// requests (a prover's control connection, idle after a finalize)
	// before it closes it, so that connections a client leaves open do not
	// pile up. Zero means 2 minutes. Tunnels are not idle connections:
	// SessionTimeout bounds them.
	IdleTimeout time.Duration
	// MaxSessions bounds the sessions held at once, open or awaiting
	// finalization; a CONNECT beyond it gets 503. Zero means 64.
	MaxSessions int
	// MaxSessionBytes bounds the TLS bytes of one session, both directions
	// together; a session beyond it is cut and cannot be finalized. Zero
	// means 256 MiB.
	MaxSessionBytes int64
	// SpoolDir is where sessions spool their records. Empty means
	// os.TempDir().
	SpoolDir string
	// SessionDone, when set, is called once for every session that ends
	// after its tunnel opened: finalized, refused at finalization, or
	// expired unclaimed (not for sessions cut by Close). It is where a
	// command logs sessions; it must not block. Nil means no call.
	SessionDone func(SessionInfo)
}

// SessionInfo describes an ended session for Config.SessionDone. It holds
// no secret and no plaintext.
type SessionInfo struct {
	ID          string
	Host        string         // CONNECT host (the server name)
	Address     netip.AddrPort // what the notary resolved and dialled
	Start, End  time.Time      // statement clock
	ClientBytes uint64         // TLS bytes the client sent
	ServerBytes uint64         // TLS bytes the server sent
	Signed      bool           // a statement was signed
	Err         error          // why not, when Signed is false
}

// maxHandshakeBytes bounds the records a session keeps in memory for the
// handshake check: everything up to the client's first encrypted record.
const maxHandshakeBytes = 256 << 10

// Notary is a recording MPC-TLS notary: an HTTP CONNECT proxy that
// notarizes the TLS sessions it relays, plus the control endpoint that
// finalizes them. Construct it with New; it is safe for concurrent use.
type Notary struct {
	cfg Config
	pub ed25519.PublicKey

	mu       sync.Mutex
	sessions map[string]*session
	servers  []*http.Server
	closed   bool
	quit     chan struct{} // closed by Close
	wg       sync.WaitGroup
}

// New returns a Notary for cfg.
func New(cfg Config) (*Notary, error) {
	if len(cfg.Key) != ed25519.PrivateKeySize {
		return nil, errors.New("notary: config needs an ed25519 key")
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: 10 * time.Second}
		cfg.Dial = d.DialContext
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 5 * time.Minute
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 5 * time.Second
	}
	if cfg.FinalizeTimeout <= 0 {
		cfg.FinalizeTimeout = 2 * time.Minute
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 2 * time.Minute
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 64
	}
	if cfg.MaxSessionBytes <= 0 {
		cfg.MaxSessionBytes = 256 << 20
	}
	if cfg.Roots == nil {
		roots, err := x509.SystemCertPool()
		if err != nil {
			return nil, fmt.Errorf("notary: system roots: %w", err)
		}
		cfg.Roots = roots
	}
	return &Notary{
		cfg:      cfg,
		pub:      cfg.Key.Public().(ed25519.PublicKey),
		sessions: map[string]*session{},
		quit:     make(chan struct{}),
	}, nil
}

// PublicKey returns the key statements are verified with.
func (n *Notary) PublicKey() ed25519.PublicKey { return n.pub }

// Handler returns the notary as an http.Handler: CONNECT requests open
// notarized tunnels, and POST /v1/sessions/{id}/finalize finalizes them.
// It must be served over HTTP/1.1 (CONNECT tunnels hijack the connection).
func (n *Notary) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sessions/{id}/finalize", n.handleFinalize)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			n.handleConnect(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// Serve accepts connections on l until Close; it returns nil after Close.
func (n *Notary) Serve(l net.Listener) error {
	srv := &http.Server{
		Handler:           n.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       n.cfg.IdleTimeout,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return ErrClosed
	}
	n.servers = append(n.servers, srv)
	n.mu.Unlock()
	err := srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops the servers started by Serve, waits for the CONNECT requests
// being handled (a resolution or a dial in progress ends with its request,
// as long as Config.Dial honours its context), cuts every open tunnel and
// discards every session and its spool.
func (n *Notary) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	close(n.quit)
	servers := n.servers
	sessions := make([]*session, 0, len(n.sessions))
	for _, s := range n.sessions {
		sessions = append(sessions, s)
	}
	n.sessions = map[string]*session{}
	n.mu.Unlock()
	var first error
	for _, srv := range servers {
		if err := srv.Close(); err != nil && first == nil {
			first = err
		}
	}
	for _, s := range sessions {
		s.abort(ErrClosed)
	}
	n.wg.Wait()
	for _, s := range sessions {
		s.discard()
	}
	return first
}

// Sessions returns the number of sessions held (open or awaiting finalize).
func (n *Notary) Sessions() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.sessions)
}

func (n *Notary) newID() (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(n.cfg.Rand, b[:]); err != nil {
		return "", fmt.Errorf("notary: session id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// reserve adds s to the table unless the notary is full or closed. On
// success it also counts the caller in n.wg, under the lock Close takes to
// mark the notary closed, so that Close waits for every CONNECT it did not
// refuse: the caller owes one n.wg.Done, when neither it nor the tunnel it
// may start runs any more.
func (n *Notary) reserve(s *session) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ErrClosed
	}
	if len(n.sessions) >= n.cfg.MaxSessions {
		return ErrCapacity
	}
	n.sessions[s.id] = s
	n.wg.Add(1)
	return nil
}

// release removes s from the table and discards its spool.
func (n *Notary) release(s *session) {
	n.mu.Lock()
	if n.sessions[s.id] == s {
		delete(n.sessions, s.id)
	}
	n.mu.Unlock()
	s.discard()
}

// take removes and returns session id for finalization.
func (n *Notary) take(id string) *session {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.sessions[id]
	if s != nil && !s.claimed {
		s.claimed = true
		return s
	}
	return nil
}

// resolve splits, resolves and vets a CONNECT target. It returns the
// allowed addresses in the resolver's order; disallowed ones are left out,
// and a target with none left is refused.
func (n *Notary) resolve(ctx context.Context, target string) (host string, addrs []netip.AddrPort, err error) {
	host, portStr, err := net.SplitHostPort(target)
	if err != nil || host == "" {
		return "", nil, fmt.Errorf("%w: %q is not host:port", ErrTarget, target)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return "", nil, fmt.Errorf("%w: bad port %q", ErrTarget, portStr)
	}
	var ips []netip.Addr
	if a, perr := netip.ParseAddr(host); perr == nil {
		ips = []netip.Addr{a}
	} else {
		ips, err = n.cfg.Resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			// The resolver's own error names the resolver ("lookup h on
			// 10.0.0.2:53: …"): only its kind is kept.
			return "", nil, fmt.Errorf("%w: cannot resolve %q: %s", ErrUnresolved, host, lookupFailure(err))
		}
		if len(ips) == 0 {
			return "", nil, fmt.Errorf("%w: %q has no address", ErrUnresolved, host)
		}
	}
	for _, ip := range ips {
		a := netip.AddrPortFrom(ip.Unmap(), uint16(port))
		if n.cfg.AllowAddr != nil && n.cfg.AllowAddr(a) != nil {
			continue
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		// The answer goes to the client: it names the target as the
		// client gave it and never the address a name resolved to, nor
		// the rule's own words (which may quote it), so that a client
		// cannot map the notary's network through its refusals.
		return "", nil, fmt.Errorf("%w: %q: no address it resolves to is allowed", ErrTarget, host)
	}
	return strings.ToLower(strings.TrimSuffix(host, ".")), addrs, nil
}

// lookupFailure says what kind of failure a name lookup had, without the
// resolver's address or the network it was asked on.
func lookupFailure(err error) string {
	var dns *net.DNSError
	switch {
	case errors.As(err, &dns) && dns.IsNotFound:
		return "no such host"
	case errors.As(err, &dns) && dns.IsTimeout, errors.Is(err, context.DeadlineExceeded):
		return "the lookup timed out"
	}
	return "the lookup failed"
}

func (n *Notary) handleConnect(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 1 {
		writeProblem(w, http.StatusHTTPVersionNotSupported, ProblemInvalid, "CONNECT needs HTTP/1.1", "")
		return
	}
	id, err := n.newID()
	if err != nil {
		writeProblem(w, http.StatusInternalServerError, ProblemInternal, "internal error", "")
		return
	}
	s := newSession(n, id)
	if err := n.reserve(s); err != nil {
		if errors.Is(err, ErrCapacity) {
			writeProblem(w, http.StatusServiceUnavailable, ProblemUnavailable, "notary full", err.Error())
		} else {
			writeProblem(w, http.StatusServiceUnavailable, ProblemUnavailable, "notary closed", err.Error())
		}
		return
	}
	// Counted in n.wg by reserve: done here, unless the tunnel's
	// goroutine takes the count over.
	handed := false
	defer func() {
		if !handed {
			n.wg.Done()
		}
	}()
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	host, addrs, err := n.resolve(ctx, r.Host)
	if errors.Is(err, ErrUnresolved) {
		n.release(s)
		writeProblem(w, http.StatusBadGateway, ProblemTargetUnresolved, "cannot resolve target", err.Error())
		return
	}
	if err != nil {
		n.release(s)
		writeProblem(w, http.StatusForbidden, ProblemTarget, "bad target", err.Error())
		return
	}
	// Try the addresses in order; the statement names the one that answered.
	var upstream net.Conn
	var addr netip.AddrPort
	for _, a := range addrs {
		if upstream, err = n.cfg.Dial(ctx, "tcp", a.String()); err == nil {
			addr = a
			break
		}
	}
	if upstream == nil {
		n.release(s)
		writeProblem(w, http.StatusBadGateway, ProblemTarget, "cannot reach target", fmt.Sprintf("no address of %s answered", host))
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		upstream.Close()
		n.release(s)
		writeProblem(w, http.StatusInternalServerError, ProblemInternal, "cannot hijack", "")
		return
	}
	s.mu.Lock()
	s.host, s.addr, s.start, s.opened = host, addr, n.cfg.Now(), time.Now()
	s.mu.Unlock()
	var clientR io.Reader = conn
	if brw.Reader.Buffered() > 0 {
		clientR = brw.Reader
	}
	resp := "HTTP/1.1 200 Connection Established\r\n" + SessionHeader + ": " + id + "\r\n" +
		AddressHeader + ": " + addr.String() + "\r\n\r\n"
	if _, err := io.WriteString(conn, resp); err != nil {
		upstream.Close()
		conn.Close()
		n.release(s)
		return
	}
	handed = true
	go func() {
		defer n.wg.Done()
		s.run(conn, clientR, upstream)
		// A closed session waits for its finalize request, then goes.
		t := time.NewTimer(n.cfg.FinalizeTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			n.mu.Lock()
			expired := n.sessions[s.id] == s && !s.claimed
			if expired {
				delete(n.sessions, s.id)
			}
			n.mu.Unlock()
			if expired {
				n.report(s, false, ErrExpired)
				s.discard()
			}
		case <-s.finalized:
		case <-n.quit:
		}
	}()
}

// report calls Config.SessionDone.
func (n *Notary) report(s *session, signed bool, err error) {
	if n.cfg.SessionDone == nil {
		return
	}
	s.mu.Lock()
	info := SessionInfo{ID: s.id, Host: s.host, Address: s.addr, Start: s.start, End: s.end, Signed: signed, Err: err}
	s.mu.Unlock()
	s.accMu.Lock()
	info.ClientBytes, info.ServerBytes = s.tr.Bytes(mpctls.ClientToServer), s.tr.Bytes(mpctls.ServerToClient)
	s.accMu.Unlock()
	n.cfg.SessionDone(info)
}

// maxFinalizeBody bounds a finalize request body.
const maxFinalizeBody = 4 << 10

func (n *Notary) handleFinalize(w http.ResponseWriter, r *http.Request) {
	var req FinalizeRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxFinalizeBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeProblem(w, http.StatusBadRequest, ProblemInvalid, "bad finalize request", "body is not a finalize request")
		return
	}
	s := n.take(r.PathValue("id"))
	if s == nil {
		writeProblem(w, http.StatusNotFound, ProblemNotFound, "no such session", "")
		return
	}
	defer func() {
		close(s.finalized)
		n.release(s)
	}()
	// The tunnel may still be draining: wait for it to end.
	select {
	case <-s.done:
	case <-r.Context().Done():
		return
	}
	resp, err := s.finalize(req)
	n.report(s, err == nil, err)
	if err != nil {
		switch {
		case errors.Is(err, ErrDisclosure):
			writeProblem(w, http.StatusBadRequest, ProblemInvalid, "bad disclosure", err.Error())
		default:
			writeProblem(w, http.StatusUnprocessableEntity, ProblemSession, "session not notarized", err.Error())
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
	// Send the statement now: the deferred release (removing a spool of
	// up to MaxSessionBytes) need not hold up the prover.
	_ = http.NewResponseController(w).Flush()
}
