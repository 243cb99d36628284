package prover

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"hash"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"

	"github.com/acds-project/acds/mpctls/notary/notarytest"
)

// The floor of a notarized fetch: the least work any correct
// implementation of this design must add to a direct fetch of the same
// response, performed on the same bytes with nothing else around it.
//
//   - one more loopback hop: the prover's TLS stream goes to a relay over
//     its own TCP connection, and the relay forwards it over another;
//   - the notary's commitment: SHA-256 of every byte of both directions at
//     the relay (the Merkle leaves; a leaf adds one 10-byte prefix and one
//     padding block per record, which the floor leaves out);
//   - the spool: the relay writes every relayed byte to a temporary file;
//   - the prover's commitment: SHA-256 of every byte of both directions
//     at the prover;
//   - the prover's own check: one AES-128-GCM pass (the suite Go picks on
//     this machine) over every server byte in 16 KiB records, the work of
//     opening each record once. Seal and Open run the same GCM kernel, so
//     the floor seals the bytes with a fixed key.
//
// The relay forwards a chunk before it hashes and spools it, so the
// floor's commitment overlaps the prover's work wherever two cores allow.

// startFloorRelay starts the floor's relay in front of target and returns
// its address. Every connection gets its own spool file in dir.
func startFloorRelay(tb testing.TB, target, dir string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	tb.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				floorRelay(c, target, dir)
			}()
		}
	}()
	return l.Addr().String()
}

func floorRelay(client net.Conn, target, dir string) {
	defer client.Close()
	server, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer server.Close()
	spool, err := os.CreateTemp(dir, "floor-spool-*")
	if err != nil {
		return
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	done := make(chan struct{})
	go func() {
		floorCopy(server, client, sha256.New(), spool)
		close(done)
	}()
	floorCopy(client, server, sha256.New(), spool)
	<-done
}

// floorCopy forwards src to dst, then hashes and (when spool is not nil)
// spools each chunk.
func floorCopy(dst, src net.Conn, h hash.Hash, spool *os.File) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			h.Write(buf[:n])
			if spool != nil {
				spool.Write(buf[:n])
			}
		}
		if err != nil {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
			return
		}
	}
}

// floorConn is the prover's side of the floor: it hashes both directions
// and runs one AEAD pass over what it reads.
type floorConn struct {
	net.Conn
	in, out hash.Hash
	aead    cipher.AEAD
	scratch []byte
	seq     uint64
}

func newFloorConn(c net.Conn) *floorConn {
	block, err := aes.NewCipher(make([]byte, 16))
	if err != nil {
		panic(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return &floorConn{Conn: c, in: sha256.New(), out: sha256.New(), aead: aead, scratch: make([]byte, 0, 16<<10+aead.Overhead())}
}

func (c *floorConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.Write(p[:n])
	for b := p[:n]; len(b) > 0; {
		k := min(len(b), 16<<10)
		var nonce [12]byte
		nonce[11] = byte(c.seq)
		nonce[10] = byte(c.seq >> 8)
		c.seq++
		c.aead.Seal(c.scratch[:0], nonce[:], b[:k], nil)
		b = b[k:]
	}
	return n, err
}

func (c *floorConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.out.Write(p[:n])
	return n, err
}

// CloseWrite keeps half-closes working through the wrapper.
func (c *floorConn) CloseWrite() error { return c.Conn.(*net.TCPConn).CloseWrite() }

// floorTransport fetches through the floor relay at relay, each request
// over a fresh floorConn.
func floorTransport(relay string, cfg *tls.Config) *http.Transport {
	return &http.Transport{
		TLSClientConfig: cfg,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", relay)
			if err != nil {
				return nil, err
			}
			return newFloorConn(c), nil
		},
		DisableKeepAlives: true, DisableCompression: true, ForceAttemptHTTP2: false,
	}
}

// TestFloorRelay checks that the floor path delivers the response intact
// and runs its AEAD pass, so the benchmark's floor is a working fetch.
func TestFloorRelay(t *testing.T) {
	ca := notarytest.NewCA(t)
	const host = "floor.test"
	scfg := &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, notarytest.ECDSA, host)}}
	port := notarytest.StartTLSServer(t, scfg, servePayload())
	relay := startFloorRelay(t, "127.0.0.1:"+port, t.TempDir())
	var conns []*floorConn
	tr := floorTransport(relay, &tls.Config{RootCAs: ca.Pool(), ServerName: host})
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, n, a string) (net.Conn, error) {
		c, err := dial(ctx, n, a)
		if err == nil {
			conns = append(conns, c.(*floorConn))
		}
		return c, err
	}
	const size = 300 << 10
	if err := get(&http.Client{Transport: tr}, fmt.Sprintf("https://%s:%s/payload?n=%d", host, port, size), size); err != nil {
		t.Fatal(err)
	}
	tr.CloseIdleConnections()
	if len(conns) != 1 || conns[0].seq < size/(16<<10) {
		t.Fatalf("floor AEAD pass covered %d chunks over %d connections", conns[0].seq, len(conns))
	}
}
