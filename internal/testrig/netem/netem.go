// Package netem emulates a wide-area link in user space: a one-way delay
// and a serialization rate for each direction, shared by every connection
// that crosses the link, and a count of the bytes carried each way. The
// kernel of the machines the project runs on has no netem qdisc, so the
// WAN benchmarks of the MPC-TLS prover and notary (and of the two-party
// engine under them) run their connections through a Link instead.
//
// A Link wraps the client end of connections (Wrap, or Dialer for a dial
// function): what the client writes travels "up", what it reads comes
// "down". Both directions are emulated at that end, so the peer needs no
// change: a byte the client writes reaches the peer Up.Delay after the up
// direction finished serializing it, and a byte the peer writes becomes
// readable Down.Delay after the down direction finished serializing it.
// A direction serializes one segment (at most SegmentSize bytes) at a
// time at its Rate, first come first served across connections, as one
// bottleneck queue would.
//
// Each wrapped connection buffers at most QueueLimit bytes per direction
// that have not yet arrived; beyond it Write blocks (the up direction) or
// the connection stops reading from the peer (the down direction), so
// memory stays bounded and a fast sender is slowed to the link's pace as
// by TCP flow control. Deadlines, Close and CloseWrite behave as on a
// TCP connection: data written before Close or CloseWrite is still
// delivered, then the peer sees the end of the stream.
//
// The emulation is of a clean link: no loss, no reordering, no jitter.
// It is meant for benchmarks and tests; timers make it accurate to a
// fraction of a millisecond on an idle machine and later on a busy one
// (it never delivers early).
package netem

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// SegmentSize is the largest unit a direction serializes at once.
const SegmentSize = 16 << 10

// QueueLimit bounds the bytes of one connection and direction that are
// in flight on the link (serialized or waiting to be).
const QueueLimit = 4 << 20

// Path is one direction of a link.
type Path struct {
	// Delay is the one-way propagation delay. A round trip over a link
	// takes Up.Delay + Down.Delay plus serialization.
	Delay time.Duration
	// Rate is the serialization rate in bits per second; zero means
	// unlimited (only the delay applies).
	Rate float64
}

// Symmetric returns the link path for a round-trip time rtt and a rate in
// bits per second, the same both ways: Delay is rtt/2.
func Symmetric(rtt time.Duration, rate float64) Path {
	return Path{Delay: rtt / 2, Rate: rate}
}

// Link is an emulated link. Its zero value is not usable; call New.
type Link struct {
	up, down *shaper
}

// New returns a link with the given up (client to peer) and down (peer to
// client) directions.
func New(up, down Path) *Link {
	return &Link{up: &shaper{path: up}, down: &shaper{path: down}}
}

// Bytes returns the bytes the link has carried so far, up and down, over
// all connections (payload bytes; TCP/IP headers are not emulated).
func (l *Link) Bytes() (up, down int64) { return l.up.bytes.Load(), l.down.bytes.Load() }

// Reset sets the byte counts to zero.
func (l *Link) Reset() {
	l.up.bytes.Store(0)
	l.down.bytes.Store(0)
}

// Dialer returns a dial function whose connections, made by dial, cross
// the link.
func (l *Link) Dialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return l.Wrap(c), nil
	}
}

// Wrap returns c as a connection across the link; c is its client end.
// The returned connection owns c and closes it.
func (l *Link) Wrap(c net.Conn) net.Conn {
	w := &conn{raw: c, link: l, up: newQueue(), down: newQueue(), closing: make(chan struct{})}
	go w.sendLoop()
	go w.recvLoop()
	return w
}

// shaper is the serialization state of one direction, shared by every
// connection on the link.
type shaper struct {
	path  Path
	mu    sync.Mutex
	free  time.Time // when the direction finishes what it has been given
	bytes atomic.Int64
}

// admit schedules n bytes entering the direction now and returns when
// they arrive at the far end.
func (s *shaper) admit(n int) time.Time {
	s.bytes.Add(int64(n))
	now := time.Now()
	s.mu.Lock()
	start := s.free
	if start.Before(now) {
		start = now
	}
	end := start
	if s.path.Rate > 0 {
		end = start.Add(time.Duration(float64(n) * 8 / s.path.Rate * float64(time.Second)))
	}
	s.free = end
	s.mu.Unlock()
	return end.Add(s.path.Delay)
}

// segment is data in flight; a nil data with eof set marks the end of the
// stream.
type segment struct {
	data []byte
	at   time.Time // arrival time
	eof  bool
}

// queue holds one direction's segments of one connection.
type queue struct {
	mu      sync.Mutex
	segs    []segment
	bytes   int
	changed chan struct{} // closed and replaced on every change
	err     error         // set when the direction failed
}

func newQueue() *queue { return &queue{changed: make(chan struct{})} }

// signal wakes every waiter; q.mu must be held.
func (q *queue) signal() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// wait blocks until the queue changes, until, or the deadline passes
// (then it returns os.ErrDeadlineExceeded), or done is closed (net.ErrClosed).
func wait(changed <-chan struct{}, until, deadline time.Time, done <-chan struct{}) error {
	var timer <-chan time.Time
	next := until
	if !deadline.IsZero() && (next.IsZero() || deadline.Before(next)) {
		next = deadline
	}
	if !next.IsZero() {
		d := time.Until(next)
		if d <= 0 {
			if next.Equal(deadline) {
				return os.ErrDeadlineExceeded
			}
			return nil
		}
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-changed:
	case <-timer:
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return os.ErrDeadlineExceeded
		}
	case <-done:
		return net.ErrClosed
	}
	return nil
}

// conn is a connection across a link.
type conn struct {
	raw  net.Conn
	link *Link
	up   *queue // written by the client, waiting to reach the peer
	down *queue // read from the peer, waiting to reach the client

	dmu           sync.Mutex
	readDeadline  time.Time
	writeDeadline time.Time

	closeOnce sync.Once
	closing   chan struct{} // closed by Close
	writeShut atomic.Bool   // CloseWrite or Close was called
}

func (c *conn) deadlines() (r, w time.Time) {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	return c.readDeadline, c.writeDeadline
}

// Read returns data that has arrived down the link.
func (c *conn) Read(p []byte) (int, error) {
	closing := c.closing
	for {
		select {
		case <-closing:
			return 0, net.ErrClosed
		default:
		}
		q := c.down
		q.mu.Lock()
		var until time.Time
		if len(q.segs) > 0 {
			head := &q.segs[0]
			if !time.Now().Before(head.at) {
				if head.eof {
					q.mu.Unlock()
					return 0, io.EOF
				}
				if len(p) == 0 {
					q.mu.Unlock()
					return 0, nil
				}
				n := copy(p, head.data)
				head.data = head.data[n:]
				q.bytes -= n
				if len(head.data) == 0 {
					q.segs = q.segs[1:]
				}
				q.signal()
				q.mu.Unlock()
				return n, nil
			}
			until = head.at
		} else if q.err != nil {
			err := q.err
			q.mu.Unlock()
			return 0, err
		}
		changed := q.changed
		q.mu.Unlock()
		rd, _ := c.deadlines()
		if err := wait(changed, until, rd, closing); err != nil {
			return 0, err
		}
	}
}

// Write queues p on the up direction, blocking while QueueLimit bytes of
// this connection are in flight.
func (c *conn) Write(p []byte) (int, error) {
	closing := c.closing
	if c.writeShut.Load() {
		return 0, net.ErrClosed
	}
	written := 0
	for len(p) > 0 {
		if _, wd := c.deadlines(); !wd.IsZero() && !time.Now().Before(wd) {
			return written, os.ErrDeadlineExceeded
		}
		q := c.up
		q.mu.Lock()
		if q.err != nil {
			err := q.err
			q.mu.Unlock()
			return written, err
		}
		if q.bytes >= QueueLimit {
			changed := q.changed
			q.mu.Unlock()
			_, wd := c.deadlines()
			if err := wait(changed, time.Time{}, wd, closing); err != nil {
				return written, err
			}
			continue
		}
		n := min(len(p), SegmentSize, QueueLimit-q.bytes)
		data := append([]byte(nil), p[:n]...)
		q.segs = append(q.segs, segment{data: data, at: c.link.up.admit(n)})
		q.bytes += n
		q.signal()
		q.mu.Unlock()
		p = p[n:]
		written += n
	}
	return written, nil
}

// sendLoop delivers the up direction's segments to the peer when they
// arrive. It ends after the end-of-stream marker, which CloseWrite and
// Close queue, or a failed write.
func (c *conn) sendLoop() {
	q := c.up
	for {
		q.mu.Lock()
		if len(q.segs) == 0 {
			changed := q.changed
			q.mu.Unlock()
			<-changed
			continue
		}
		head := q.segs[0]
		q.mu.Unlock()
		if d := time.Until(head.at); d > 0 {
			time.Sleep(d)
		}
		var err error
		if head.eof {
			err = closeWrite(c.raw)
		} else {
			_, err = c.raw.Write(head.data)
		}
		q.mu.Lock()
		q.segs = q.segs[1:]
		q.bytes -= len(head.data)
		if err != nil && q.err == nil {
			q.err = err
		}
		q.signal()
		q.mu.Unlock()
		if head.eof || err != nil {
			return
		}
	}
}

func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// recvLoop reads the peer's data and queues it down the link.
func (c *conn) recvLoop() {
	q := c.down
	closing := c.closing
	for {
		q.mu.Lock()
		for q.bytes >= QueueLimit {
			changed := q.changed
			q.mu.Unlock()
			select {
			case <-changed:
			case <-closing:
				return
			}
			q.mu.Lock()
		}
		q.mu.Unlock()
		buf := make([]byte, SegmentSize)
		n, err := c.raw.Read(buf)
		q.mu.Lock()
		if n > 0 {
			q.segs = append(q.segs, segment{data: buf[:n], at: c.link.down.admit(n)})
			q.bytes += n
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				// The end of the stream travels after the last byte.
				at := time.Now().Add(c.link.down.path.Delay)
				if k := len(q.segs); k > 0 && q.segs[k-1].at.After(at) {
					at = q.segs[k-1].at
				}
				q.segs = append(q.segs, segment{at: at, eof: true})
			} else {
				q.err = err
			}
		}
		q.signal()
		q.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// CloseWrite ends the up direction once what was written has arrived.
func (c *conn) CloseWrite() error {
	if c.writeShut.Swap(true) {
		return nil
	}
	q := c.up
	q.mu.Lock()
	at := time.Now().Add(c.link.up.path.Delay)
	if k := len(q.segs); k > 0 && q.segs[k-1].at.After(at) {
		at = q.segs[k-1].at
	}
	q.segs = append(q.segs, segment{at: at, eof: true})
	q.signal()
	q.mu.Unlock()
	return nil
}

// Close closes the connection. Data written before it is still delivered
// (then the raw connection is closed); reads fail at once.
func (c *conn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		c.CloseWrite()
		close(c.closing)
	})
	if !first {
		return nil
	}
	go func() {
		// Wait for the up direction to drain (the FIN marker is its last
		// segment), then release the raw connection.
		q := c.up
		for {
			q.mu.Lock()
			empty := len(q.segs) == 0 || q.err != nil
			changed := q.changed
			q.mu.Unlock()
			if empty {
				break
			}
			<-changed
		}
		c.raw.Close()
	}()
	return nil
}

func (c *conn) LocalAddr() net.Addr  { return c.raw.LocalAddr() }
func (c *conn) RemoteAddr() net.Addr { return c.raw.RemoteAddr() }

func (c *conn) SetDeadline(t time.Time) error {
	c.dmu.Lock()
	c.readDeadline, c.writeDeadline = t, t
	c.moveDeadline()
	c.dmu.Unlock()
	return nil
}

func (c *conn) SetReadDeadline(t time.Time) error {
	c.dmu.Lock()
	c.readDeadline = t
	c.moveDeadline()
	c.dmu.Unlock()
	return nil
}

func (c *conn) SetWriteDeadline(t time.Time) error {
	c.dmu.Lock()
	c.writeDeadline = t
	c.moveDeadline()
	c.dmu.Unlock()
	return nil
}

// moveDeadline wakes the waiters of both directions so that they see the
// new deadline.
func (c *conn) moveDeadline() {
	for _, q := range []*queue{c.up, c.down} {
		q.mu.Lock()
		q.signal()
		q.mu.Unlock()
	}
}
