package prover

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acds-project/acds/mpctls"
)

// splitter cuts one direction's byte stream into TLS records, keeping
// every record. Each record is assembled straight into its own buffer, so
// every byte is copied once. It is fed in stream order by a single
// goroutine at a time.
type splitter struct {
	dir     mpctls.Direction
	hdr     [mpctls.HeaderLen]byte // header of the record being read
	hdrN    int                    // bytes of hdr filled
	cur     []byte                 // the record being read, once its header is known
	curN    int                    // bytes of cur filled
	records []mpctls.Record        // appended under *mu
	leaves  [][32]byte             // Merkle leaf hash of each record, appended under *mu
	hasher  mpctls.LeafHasher
	mu      *sync.Mutex
	notify  chan struct{}
	bytes   atomic.Int64 // read by the other direction's goroutine
	err     error
}

func (s *splitter) feed(p []byte) {
	if s.err != nil || len(p) == 0 {
		return
	}
	s.bytes.Add(int64(len(p)))
	added := false
	for len(p) > 0 {
		if s.cur == nil {
			k := copy(s.hdr[s.hdrN:], p)
			s.hdrN += k
			p = p[k:]
			if s.hdrN < mpctls.HeaderLen {
				break
			}
			n := int(binary.BigEndian.Uint16(s.hdr[3:5]))
			if n > mpctls.MaxFragment {
				s.err = &mpctls.RecordError{Dir: s.dir, Seq: uint64(len(s.records)), Reason: fmt.Sprintf("fragment of %d bytes", n), Err: mpctls.ErrRecordTooLarge}
				return
			}
			s.cur = make([]byte, mpctls.HeaderLen+n)
			s.curN = copy(s.cur, s.hdr[:])
		}
		k := copy(s.cur[s.curN:], p)
		s.curN += k
		p = p[k:]
		if s.curN < len(s.cur) {
			break
		}
		raw := s.cur
		s.cur, s.curN, s.hdrN = nil, 0, 0
		rec := mpctls.Record{
			Dir:     s.dir,
			Seq:     uint64(len(s.records)),
			Type:    raw[0],
			Version: binary.BigEndian.Uint16(raw[1:3]),
			Raw:     raw,
		}
		// Hash the record while its bytes are still in this core's
		// cache: a second pass later, on another goroutine, costs more.
		leaf := s.hasher.Sum(rec)
		s.mu.Lock()
		s.records = append(s.records, rec)
		s.leaves = append(s.leaves, leaf)
		s.mu.Unlock()
		added = true
	}
	if added {
		select {
		case s.notify <- struct{}{}:
		default:
		}
	}
}

// pending returns the bytes of an unfinished record.
func (s *splitter) pending() []byte {
	if s.cur != nil {
		return s.cur[:s.curN]
	}
	return s.hdr[:s.hdrN]
}

// finish reports a stream that ended inside a record.
func (s *splitter) finish() error {
	if s.err != nil {
		return s.err
	}
	if len(s.pending()) > 0 {
		return &mpctls.RecordError{Dir: s.dir, Seq: uint64(len(s.records)), Reason: "stream ends inside a record", Err: mpctls.ErrTruncated}
	}
	return nil
}

// captureConn sits between crypto/tls and the tunnel to the notary and
// records the raw TLS records of both directions. Its Close half-closes
// the tunnel and reads the rest of the server's records, so that the
// prover ends up having seen every record the notary relayed to it.
type captureConn struct {
	net.Conn
	drain time.Duration
	max   int64 // bytes both ways before the session is cut

	rmu sync.Mutex // serializes reads, so records are fed in order
	in  splitter   // server → client
	eof bool       // the tunnel's read side ended

	wmu sync.Mutex
	out splitter // client → server

	mu     sync.Mutex    // guards the record slices of in and out
	notify chan struct{} // signalled when records were added

	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error
}

func newCaptureConn(c net.Conn, drain time.Duration, max int64) *captureConn {
	cc := &captureConn{
		Conn:   c,
		drain:  drain,
		max:    max,
		notify: make(chan struct{}, 1),
		closed: make(chan struct{}),
	}
	cc.in = splitter{dir: mpctls.ServerToClient, mu: &cc.mu, notify: cc.notify}
	cc.out = splitter{dir: mpctls.ClientToServer, mu: &cc.mu, notify: cc.notify}
	return cc
}

func (c *captureConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.eof {
		return 0, net.ErrClosed
	}
	n, err := c.Conn.Read(p)
	c.in.feed(p[:n])
	if err != nil && !isTimeout(err) {
		c.eof = true
	}
	if c.in.bytes.Load()+c.out.bytes.Load() > c.max {
		c.eof = true
		c.closeErr = fmt.Errorf("%w: more than %d bytes", ErrLimit, c.max)
		return n, c.closeErr
	}
	return n, err
}

func (c *captureConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n, err := c.Conn.Write(p)
	c.out.feed(p[:n])
	return n, err
}

// Close half-closes the tunnel, drains the server's remaining records
// (its close_notify, typically) for up to the drain timeout, and closes.
func (c *captureConn) Close() error {
	c.closeOnce.Do(func() {
		c.wmu.Lock()
		if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		c.wmu.Unlock()
		c.Conn.SetReadDeadline(time.Now().Add(c.drain))
		c.rmu.Lock()
		buf := make([]byte, 32<<10)
		for !c.eof {
			n, err := c.Conn.Read(buf)
			c.in.feed(buf[:n])
			if err != nil {
				c.eof = true
				if isTimeout(err) && c.closeErr == nil {
					c.closeErr = fmt.Errorf("%w: the notary did not end the tunnel within %v", ErrIncomplete, c.drain)
				}
			}
		}
		c.rmu.Unlock()
		c.Conn.Close()
		close(c.closed)
	})
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// snapshot returns the captured records of both directions once the
// connection is closed.
func (c *captureConn) snapshot() (client, server []mpctls.Record, err error) {
	<-c.closed
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closeErr != nil {
		return nil, nil, c.closeErr
	}
	if err := c.out.finish(); err != nil {
		return nil, nil, err
	}
	if err := c.in.finish(); err != nil {
		return nil, nil, err
	}
	return c.out.records, c.in.records, nil
}

// leaves returns the Merkle leaf hashes of the records captured so far,
// indexed by direction and sequence number.
func (c *captureConn) leaves() (leaves [3][][32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	leaves[mpctls.ClientToServer], leaves[mpctls.ServerToClient] = c.out.leaves, c.in.leaves
	return leaves
}

// records returns the records captured so far. The slices are safe to
// read while capture goes on: records are never changed once appended.
func (c *captureConn) records() (client, server []mpctls.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.records, c.in.records
}
