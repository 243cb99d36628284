package netem

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/nettest"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			acc <- nil
			return
		}
		acc <- c
	}()
	client, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-acc
	if server == nil {
		t.Fatal("accept failed")
	}
	return client, server
}

// TestConnConformance runs x/net's net.Conn conformance suite (I/O,
// deadlines, close, concurrent use) on a wrapped connection.
func TestConnConformance(t *testing.T) {
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		link := New(Path{Delay: 200 * time.Microsecond, Rate: 1e9}, Path{Delay: 200 * time.Microsecond, Rate: 1e9})
		a, b := tcpPair(t)
		c1 = link.Wrap(a)
		return c1, b, func() { c1.Close(); b.Close() }, nil
	})
}

// TestRoundTripDelay: a ping-pong over a link never takes less than the
// sum of the two delays per exchange (arrival is never early).
func TestRoundTripDelay(t *testing.T) {
	const d = 10 * time.Millisecond
	link := New(Path{Delay: d}, Path{Delay: 2 * d})
	a, b := tcpPair(t)
	c := link.Wrap(a)
	defer c.Close()
	defer b.Close()
	go func() {
		buf := make([]byte, 1)
		for {
			if _, err := io.ReadFull(b, buf); err != nil {
				return
			}
			if _, err := b.Write(buf); err != nil {
				return
			}
		}
	}()
	const rounds = 5
	start := time.Now()
	buf := []byte{7}
	for i := 0; i < rounds; i++ {
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
	}
	if el := time.Since(start); el < rounds*3*d {
		t.Fatalf("%d round trips took %v, less than %v", rounds, el, rounds*3*d)
	}
	up, down := link.Bytes()
	if up != rounds || down != rounds {
		t.Fatalf("link counted %d up, %d down; want %d each", up, down, rounds)
	}
}

// TestRateAndIntegrity: data arrives intact and in order, and no sooner
// than its serialization at the link's rate allows; two connections
// share the rate.
func TestRateAndIntegrity(t *testing.T) {
	const rate = 40e6 // bits/s
	const n = 1 << 20
	link := New(Path{Delay: time.Millisecond, Rate: rate}, Path{Delay: time.Millisecond, Rate: rate})
	payload := make([]byte, n)
	rand.Read(payload)
	var wg sync.WaitGroup
	start := time.Now()
	errs := make(chan error, 4)
	for i := 0; i < 2; i++ {
		a, b := tcpPair(t)
		c := link.Wrap(a)
		wg.Add(2)
		go func() { // up: client writes, peer reads
			defer wg.Done()
			if _, err := c.Write(payload); err != nil {
				errs <- err
			}
			c.(interface{ CloseWrite() error }).CloseWrite()
		}()
		go func() {
			defer wg.Done()
			got, err := io.ReadAll(b)
			if err != nil {
				errs <- err
			} else if !bytes.Equal(got, payload) {
				errs <- errors.New("up payload corrupted")
			}
			b.Close()
			c.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	min := time.Duration(2 * n * 8 / rate * float64(time.Second))
	if el := time.Since(start); el < min {
		t.Fatalf("2 × %d bytes at %.0f bit/s took %v, less than %v", n, rate, el, min)
	}
	if up, _ := link.Bytes(); up != 2*n {
		t.Fatalf("link counted %d bytes up, want %d", up, 2*n)
	}

	// Down: the peer writes, the client reads.
	link.Reset()
	a, b := tcpPair(t)
	c := link.Wrap(a)
	defer c.Close()
	go func() {
		b.Write(payload)
		b.Close()
	}()
	start = time.Now()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("down payload corrupted")
	}
	if el, min := time.Since(start), time.Duration(n*8/rate*float64(time.Second)); el < min {
		t.Fatalf("%d bytes down took %v, less than %v", n, el, min)
	}
	if _, down := link.Bytes(); down != n {
		t.Fatalf("link counted %d bytes down, want %d", down, n)
	}
}

// TestBoundedQueue: a writer faster than the link blocks once QueueLimit
// bytes are in flight, so memory stays bounded; its deadline still fires.
func TestBoundedQueue(t *testing.T) {
	link := New(Path{Rate: 1e6}, Path{})
	a, b := tcpPair(t)
	defer b.Close()
	c := link.Wrap(a)
	defer c.Close()
	c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	n, err := c.Write(make([]byte, 3*QueueLimit))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write past the queue limit: %v, want a deadline error", err)
	}
	// What the link drained meanwhile (1 Mbit/s for 200 ms) is room again.
	if n > QueueLimit+64<<10 {
		t.Fatalf("wrote %d bytes into a link that holds %d", n, QueueLimit)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("deadline error %v is not a net.Error timeout", err)
	}
}

// TestCloseDelivers: data written before Close still reaches the peer,
// followed by the end of the stream.
func TestCloseDelivers(t *testing.T) {
	link := New(Path{Delay: 5 * time.Millisecond, Rate: 8e6}, Path{Delay: 5 * time.Millisecond})
	a, b := tcpPair(t)
	defer b.Close()
	c := link.Wrap(a)
	msg := bytes.Repeat([]byte("x"), 100<<10)
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	b.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("peer got %d bytes, want %d", len(got), len(msg))
	}
}
