package notary

import (
	"bufio"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/acds-project/acds/mpctls"
)

// accQueue bounds the relayed records waiting to be hashed and spooled:
// at most accQueue × 18 KiB per session.
const accQueue = 32

// recBuf is a record buffer shared by a pump, which forwards the record,
// and the accumulator, which hashes and spools it. Whichever finishes
// last hands it back to the pump's free list, so a session reuses a few
// buffers instead of allocating (and zeroing) one per record.
type recBuf struct {
	raw  []byte
	refs atomic.Int32
	free chan *recBuf
}

// release drops one reference; the last returns the buffer for reuse.
func (b *recBuf) release() {
	if b.refs.Add(-1) == 0 {
		select {
		case b.free <- b:
		default: // the free list is full: let the buffer go
		}
	}
}

// accItem is one relayed record on its way to the accumulator.
type accItem struct {
	rec mpctls.Record
	buf *recBuf
}

// session is one notarized tunnel: its relay state, transcript and spool.
type session struct {
	n     *Notary
	id    string
	host  string         // CONNECT host, lower case
	addr  netip.AddrPort // what the notary resolved and dialled
	start time.Time      // statement clock, when the tunnel opened
	end   time.Time      // statement clock, when it closed
	// opened is the real (monotonic) time the tunnel opened: the zero of
	// the spool's timing column.
	opened time.Time

	done      chan struct{} // closed when the relay has ended
	finalized chan struct{} // closed when a finalize request has been answered
	claimed   bool          // a finalize request owns it (guarded by n.mu)

	// mu guards the relay state, which the pumps check on every record.
	mu         sync.Mutex
	err        error // first error that ended the session, nil if clean
	watch      helloWatch
	sniChecked bool
	total      int64
	conns      []net.Conn

	// accMu guards the accumulator's state, so that hashing and spooling
	// a record never holds up the pumps. Lock order: mu, then accMu.
	accMu     sync.Mutex
	tr        mpctls.Transcript
	hs        []mpctls.Record
	hsBytes   int
	hsDone    bool
	spool     *os.File
	spoolW    *bufio.Writer
	spoolName string
}

func newSession(n *Notary, id string) *session {
	return &session{n: n, id: id, done: make(chan struct{}), finalized: make(chan struct{})}
}

// fail records the first error of the session.
func (s *session) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
}

// abort ends the session with err and cuts its connections.
func (s *session) abort(err error) {
	s.fail(err)
	s.mu.Lock()
	conns := s.conns
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// discard removes the spool. Safe to call more than once.
func (s *session) discard() {
	s.accMu.Lock()
	defer s.accMu.Unlock()
	if s.spool != nil {
		s.spool.Close()
		os.Remove(s.spoolName)
		s.spool, s.spoolW = nil, nil
	}
}

// run relays the tunnel until both directions have ended, then closes
// both connections and the done channel.
func (s *session) run(client net.Conn, clientR io.Reader, server net.Conn) {
	defer close(s.done)
	s.mu.Lock()
	s.conns = []net.Conn{client, server}
	aborted := s.err != nil
	s.mu.Unlock()
	if aborted {
		// Aborted (the notary closing) before the connections were
		// known to abort, which therefore could not cut them.
		client.Close()
		server.Close()
		return
	}
	f, err := os.CreateTemp(s.n.cfg.SpoolDir, "acds-notary-spool-*")
	if err != nil {
		client.Close()
		server.Close()
		s.fail(fmt.Errorf("notary: spool: %w", err))
		return
	}
	s.accMu.Lock()
	s.spool, s.spoolName, s.spoolW = f, f.Name(), bufio.NewWriterSize(f, 64<<10)
	s.accMu.Unlock()

	deadline := time.Now().Add(s.n.cfg.SessionTimeout)
	client.SetDeadline(deadline)
	server.SetDeadline(deadline)

	// Hashing and spooling run beside the relay, not in its way: the
	// pumps hand each relayed record to the accumulator, whose channel
	// order is the arrival order. The channel bounds what is in flight.
	acc := make(chan accItem, accQueue)
	accDone := make(chan struct{})
	go func() {
		defer close(accDone)
		failed := false
		for it := range acc {
			if !failed {
				if err := s.record(it.rec); err != nil {
					failed = true
					s.abort(err)
				}
			}
			it.buf.release()
		}
	}()
	type result struct {
		dir mpctls.Direction
		err error
	}
	res := make(chan result, 2)
	go func() {
		res <- result{mpctls.ClientToServer, s.pump(mpctls.ClientToServer, bufio.NewReaderSize(resetAsEOF{clientR}, 32<<10), server, acc)}
	}()
	go func() {
		res <- result{mpctls.ServerToClient, s.pump(mpctls.ServerToClient, bufio.NewReaderSize(resetAsEOF{server}, 32<<10), client, acc)}
	}()
	first := <-res
	if first.err != nil {
		s.abort(first.err)
	} else {
		// One side finished cleanly: give the other a bounded time to end.
		drain := time.Now().Add(s.n.cfg.DrainTimeout)
		if drain.Before(deadline) {
			client.SetDeadline(drain)
			server.SetDeadline(drain)
		}
	}
	second := <-res
	if second.err != nil && first.err == nil {
		s.fail(second.err)
	}
	close(acc)
	<-accDone
	client.Close()
	server.Close()
	s.accMu.Lock()
	var flushErr error
	if s.spoolW != nil {
		if err := s.spoolW.Flush(); err != nil {
			flushErr = fmt.Errorf("notary: spool: %w", err)
		}
	}
	s.accMu.Unlock()
	if flushErr != nil {
		s.fail(flushErr)
	}
	s.mu.Lock()
	s.end = s.n.cfg.Now()
	s.mu.Unlock()
}

// pump relays the records of one direction. It returns nil when the
// source ended cleanly at a record boundary.
func (s *session) pump(dir mpctls.Direction, src io.Reader, dst net.Conn, acc chan<- accItem) error {
	rr := mpctls.NewRecordReader(src, dir)
	dstGone := false
	// Record buffers come back here once forwarded and accumulated. The
	// records in flight are bounded by the acc queue, so this is too.
	free := make(chan *recBuf, accQueue+2)
	for {
		var buf *recBuf
		select {
		case buf = <-free:
		default:
			buf = &recBuf{raw: make([]byte, 0, mpctls.HeaderLen+mpctls.MaxFragment), free: free}
		}
		buf.refs.Store(2)
		rec, err := rr.NextInto(buf.raw)
		if err != nil {
			if errors.Is(err, io.EOF) {
				closeWrite(dst)
				return nil
			}
			if errors.Is(err, mpctls.ErrNotTLS) || errors.Is(err, mpctls.ErrUnknownRecordType) ||
				errors.Is(err, mpctls.ErrMalformedRecord) || errors.Is(err, mpctls.ErrRecordTooLarge) {
				return fmt.Errorf("%w: %w", ErrRefused, err)
			}
			if isTimeout(err) {
				return fmt.Errorf("%w: %s direction timed out: %w", ErrLimit, dir, err)
			}
			return err
		}
		if err := s.admit(rec); err != nil {
			return err
		}
		// The record joins the transcript when it arrives, before it is
		// forwarded: the arrival order then respects causality (a reply
		// never precedes what it answers), which the handshake check and
		// its in-memory cut rely on.
		acc <- accItem{rec, buf}
		err = s.forward(dir, dst, rec, &dstGone)
		buf.release()
		if err != nil {
			return err
		}
	}
}

// forward writes rec to dst unless dst has gone (see dstGone).
func (s *session) forward(dir mpctls.Direction, dst net.Conn, rec mpctls.Record, dstGone *bool) error {
	if *dstGone {
		return nil
	}
	if _, err := dst.Write(rec.Raw); err != nil {
		switch {
		case isTimeout(err):
			return fmt.Errorf("%w: %s direction timed out: %w", ErrLimit, dir, err)
		case errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET):
			// The receiver is gone (a server that reset after its
			// last response, a prover that closed). The record was
			// still seen coming from its sender, so it stays in the
			// transcript; the rest of this direction is read and
			// recorded but no longer forwarded.
			*dstGone = true
		default:
			return fmt.Errorf("notary: relaying %s record %d: %w", dir, rec.Seq, err)
		}
	}
	return nil
}

// resetAsEOF reports a connection reset as the end of the stream. Servers
// (and load balancers) often reset instead of closing; what matters to the
// transcript is whether the stream ended at a record boundary, which the
// record reader decides: a reset inside a record is still a truncation.
type resetAsEOF struct{ r io.Reader }

func (r resetAsEOF) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && errors.Is(err, syscall.ECONNRESET) {
		err = io.EOF
	}
	return n, err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

// admit applies the policy and limits to a record before it is relayed.
func (s *session) admit(rec mpctls.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.total += int64(len(rec.Raw))
	if s.total > s.n.cfg.MaxSessionBytes {
		return fmt.Errorf("%w: more than %d bytes", ErrLimit, s.n.cfg.MaxSessionBytes)
	}
	if err := s.watch.observe(rec); err != nil {
		return err
	}
	if s.watch.ch != nil && !s.sniChecked {
		// The server name must be the host the notary resolved, or the
		// statement would pair one name with another name's address.
		s.sniChecked = true
		if s.watch.ch.serverName == "" {
			return refuse("ClientHello has no server name")
		}
		if !equalFoldASCII(s.watch.ch.serverName, s.host) {
			return refuse("server name %q is not the CONNECT host %q", s.watch.ch.serverName, s.host)
		}
	}
	return nil
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// record adds a relayed record to the transcript, the spool and, during
// the handshake, the in-memory handshake records.
func (s *session) record(rec mpctls.Record) error {
	s.accMu.Lock()
	defer s.accMu.Unlock()
	if err := s.tr.Add(rec); err != nil {
		return err
	}
	if !s.hsDone {
		s.hsBytes += len(rec.Raw)
		if s.hsBytes > maxHandshakeBytes {
			return fmt.Errorf("%w: handshake above %d bytes", ErrLimit, maxHandshakeBytes)
		}
		// The record's buffer is recycled once accumulated: keep a copy.
		rec.Raw = append([]byte(nil), rec.Raw...)
		s.hs = append(s.hs, rec)
		if rec.Dir == mpctls.ClientToServer && rec.Type == recordTypeAppData {
			s.hsDone = true
		}
	}
	if s.spoolW == nil {
		return ErrClosed
	}
	var hdr [9]byte
	hdr[0] = byte(rec.Dir)
	binary.BigEndian.PutUint64(hdr[1:], uint64(time.Since(s.opened)))
	if _, err := s.spoolW.Write(hdr[:]); err != nil {
		return fmt.Errorf("notary: spool: %w", err)
	}
	if _, err := s.spoolW.Write(rec.Raw); err != nil {
		return fmt.Errorf("notary: spool: %w", err)
	}
	return nil
}

// readSpooled reads the record that follows a spool entry header.
func readSpooled(r io.Reader, dir mpctls.Direction) (mpctls.Record, error) {
	var h [mpctls.HeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return mpctls.Record{}, fmt.Errorf("notary: spool: %w", err)
	}
	n := int(binary.BigEndian.Uint16(h[3:5]))
	if n > mpctls.MaxFragment || !dir.Valid() {
		return mpctls.Record{}, errors.New("notary: spool: corrupt entry")
	}
	raw := make([]byte, mpctls.HeaderLen+n)
	copy(raw, h[:])
	if _, err := io.ReadFull(r, raw[mpctls.HeaderLen:]); err != nil {
		return mpctls.Record{}, fmt.Errorf("notary: spool: %w", err)
	}
	return mpctls.Record{Dir: dir, Type: h[0], Version: binary.BigEndian.Uint16(h[1:3]), Raw: raw}, nil
}

// finalize checks the handshake and signs the statement.
func (s *session) finalize(req FinalizeRequest) (*FinalizeResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accMu.Lock()
	defer s.accMu.Unlock()
	if s.err != nil {
		return nil, &SessionError{ID: s.id, Err: s.err}
	}
	nc, ns := s.tr.Records(mpctls.ClientToServer), s.tr.Records(mpctls.ServerToClient)
	if req.ClientRecords > nc || req.ServerRecords > ns {
		return nil, fmt.Errorf("%w: prover claims %d/%d records, notary relayed %d/%d",
			ErrDisclosure, req.ClientRecords, req.ServerRecords, nc, ns)
	}
	if req.ClientRecords == 0 || req.ServerRecords == 0 {
		return nil, fmt.Errorf("%w: no records in a direction", ErrDisclosure)
	}
	if len(req.ServerHandshakeTrafficSecret) > 64 {
		return nil, fmt.Errorf("%w: secret too long", ErrDisclosure)
	}
	hs, err := mpctls.VerifyHandshake(s.hs, mpctls.Disclosure{ServerHandshakeTrafficSecret: req.ServerHandshakeTrafficSecret},
		mpctls.HandshakeOptions{Roots: s.n.cfg.Roots, SNI: s.host, Now: s.start})
	if err != nil {
		return nil, &SessionError{ID: s.id, Err: err}
	}
	tr, err := s.prefix(req.ClientRecords, req.ServerRecords)
	if err != nil {
		return nil, &SessionError{ID: s.id, Err: err}
	}
	var sid [16]byte
	if _, err := hex.Decode(sid[:], []byte(s.id)); err != nil {
		return nil, err
	}
	st := &mpctls.Statement{
		SessionID:       sid,
		Start:           s.start,
		End:             s.end,
		SNI:             s.host,
		Address:         s.addr.String(),
		Version:         hs.Version,
		CipherSuite:     hs.CipherSuite,
		CertChainDigest: hs.CertChainDigest,
		CertSubject:     leafSubject(hs.Certificates),
		Root:            tr.Root(),
		ClientRecords:   tr.Records(mpctls.ClientToServer),
		ClientBytes:     tr.Bytes(mpctls.ClientToServer),
		ServerRecords:   tr.Records(mpctls.ServerToClient),
		ServerBytes:     tr.Bytes(mpctls.ServerToClient),
	}
	b, err := st.Sign(s.n.cfg.Key)
	if err != nil {
		return nil, err
	}
	return &FinalizeResponse{Statement: b, Order: tr.Order()}, nil
}

// prefix returns the transcript restricted to the first nc client and ns
// server records, in arrival order. When that is everything, it is the
// live transcript; otherwise it is rebuilt from the spool.
func (s *session) prefix(nc, ns uint64) (*mpctls.Transcript, error) {
	if nc == s.tr.Records(mpctls.ClientToServer) && ns == s.tr.Records(mpctls.ServerToClient) {
		return &s.tr, nil
	}
	if s.spool == nil {
		return nil, ErrClosed
	}
	if _, err := s.spool.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("notary: spool: %w", err)
	}
	br := bufio.NewReaderSize(s.spool, 64<<10)
	var tr mpctls.Transcript
	var seen [3]uint64
	for tr.Records(mpctls.ClientToServer) < nc || tr.Records(mpctls.ServerToClient) < ns {
		var hdr [9]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return nil, fmt.Errorf("notary: spool: %w", err)
		}
		dir := mpctls.Direction(hdr[0])
		rec, err := readSpooled(br, dir)
		if err != nil {
			return nil, err
		}
		rec.Seq = seen[dir]
		seen[dir]++
		limit := nc
		if dir == mpctls.ServerToClient {
			limit = ns
		}
		if rec.Seq >= limit {
			continue
		}
		if err := tr.Add(rec); err != nil {
			return nil, err
		}
	}
	if _, err := s.spool.Seek(0, io.SeekEnd); err != nil {
		return nil, fmt.Errorf("notary: spool: %w", err)
	}
	return &tr, nil
}

// leafSubject is the subject of the verified leaf certificate, as the
// statement records it: RFC 2253, cut at mpctls.MaxCertSubject bytes on a
// rune boundary, control characters replaced.
func leafSubject(chain []*x509.Certificate) string {
	if len(chain) == 0 {
		return ""
	}
	s := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(chain[0].Subject.String(), "?"))
	for len(s) > mpctls.MaxCertSubject {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}
