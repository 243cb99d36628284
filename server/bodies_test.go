package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
)

// readSignal is a request body that reports its first Read: the handler
// has started reading the body, so whatever it allocated before reading
// is allocated.
type readSignal struct {
	io.ReadCloser
	once sync.Once
	c    chan<- struct{}
}

func (r *readSignal) Read(p []byte) (int, error) {
	r.once.Do(func() { r.c <- struct{}{} })
	return r.ReadCloser.Read(p)
}

// bodyServer starts cfg's server on loopback behind NewHTTPServer, with
// every request body that declares more than 1 KiB reporting its first
// read on the returned channel.
func bodyServer(t *testing.T, mod func(*server.Config)) (addr string, reads <-chan struct{}, token string) {
	t.Helper()
	cfg := server.Config{
		Store:     servertest.NewMemStore(),
		Pipeline:  &servertest.Pipeline{},
		Enclave:   servertest.NewEnclave(),
		Verifier:  servertest.Verifier{},
		Logger:    slog.New(slog.DiscardHandler),
		RateLimit: -1, AuthRateLimit: -1,
		Workers: -1,
	}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := make(chan struct{}, 1024)
	h := srv.Handler()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := server.NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > 1<<10 {
			r.Body = &readSignal{ReadCloser: r.Body, c: c}
		}
		h.ServeHTTP(w, r)
	}), server.HTTPOptions{})
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() {
		_ = hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
	})
	resp, err := http.Post("http://"+ln.Addr().String()+"/v1/auth/anon", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("anon: %d %s", resp.StatusCode, b)
	}
	return ln.Addr().String(), c, decode[acds.Session](t, b).Token
}

// declare opens a connection and sends the headers of a POST to path that
// declares a body of length bytes, and then prefix of it.
func declare(t *testing.T, addr, path, token string, length int, prefix string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: acds\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		path, auth, length, prefix); err != nil {
		t.Fatal(err)
	}
	return conn
}

func waitReads(t *testing.T, reads <-chan struct{}, n int) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for i := 0; i < n; i++ {
		select {
		case <-reads:
		case <-timeout:
			t.Fatalf("only %d of %d handlers started reading their body", i, n)
		}
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestDeclaredLengthAllocatesNothing is issue 15's memory exhaustion: many
// connections declare a body just under the 32 MiB limit and send nothing.
// The server must not allocate from the declared length: the heap grows by
// what the connections cost, not by what they declare (the old code grew
// each buffer to 32 MiB before reading: 24 connections, 768 MiB).
func TestDeclaredLengthAllocatesNothing(t *testing.T) {
	addr, reads, token := bodyServer(t, nil)
	const conns = 24
	before := heapInUse()
	for i := 0; i < conns; i++ {
		path, tok := "/v1/process", token
		if i%2 == 1 {
			path, tok = "/v1/verify", ""
		}
		declare(t, addr, path, tok, server.DefaultMaxProcessBody-1, "")
	}
	waitReads(t, reads, conns)
	after := heapInUse()
	growth := int64(after) - int64(before)
	t.Logf("heap %d → %d bytes with %d connections declaring %d bytes each", before, after, conns, server.DefaultMaxProcessBody-1)
	if growth > 16<<20 {
		t.Fatalf("heap grew by %d MiB for %d connections that sent no body byte; want < 16 MiB", growth>>20, conns)
	}
}

// readUntilClosed reads conn until the server closes it, and fails when
// that takes longer than within.
func readUntilClosed(t *testing.T, conn net.Conn, within time.Duration) string {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(within))
	b, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept a stalled upload open for %v (read %q)", within, b)
	}
	return string(b)
}

// TestStalledUploadIsClosed: a client that sends part of a body and then
// nothing, or trickles it, has its connection closed once the body's idle
// or total deadline passes.
func TestStalledUploadIsClosed(t *testing.T) {
	addr, reads, token := bodyServer(t, func(c *server.Config) {
		c.BodyIdleTimeout = 300 * time.Millisecond
		c.BodyTimeout = 2 * time.Second
	})
	t.Run("stalled", func(t *testing.T) {
		conn := declare(t, addr, "/v1/process", token, 100_000, `{"data":`)
		waitReads(t, reads, 1)
		if got := readUntilClosed(t, conn, 10*time.Second); strings.Contains(got, "202") {
			t.Fatalf("a stalled upload was answered: %q", got)
		}
	})
	t.Run("trickle", func(t *testing.T) {
		conn := declare(t, addr, "/v1/verify", "", 100_000, `{"attestationBundle":"`)
		waitReads(t, reads, 1)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < 200; i++ {
				if _, err := conn.Write([]byte("A")); err != nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
		readUntilClosed(t, conn, 10*time.Second)
		conn.Close()
		<-done
	})
}

// slowVerifier answers after a delay longer than the body idle timeout,
// and fails when the request's context ended meanwhile.
type slowVerifier struct{ delay time.Duration }

func (v slowVerifier) Verify(ctx context.Context, bundle, output []byte) (*acds.VerifyResponse, error) {
	select {
	case <-time.After(v.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &acds.VerifyResponse{Details: acds.VerifyDetails{Reasons: []string{}}}, nil
}

// TestBodyDeadlineEndsWithTheBody: the read deadline set for the body is
// lifted once it is read, so a handler that works longer than
// BodyIdleTimeout afterwards is not cut off.
func TestBodyDeadlineEndsWithTheBody(t *testing.T) {
	addr, _, _ := bodyServer(t, func(c *server.Config) {
		c.BodyIdleTimeout = 200 * time.Millisecond
		c.Verifier = slowVerifier{delay: time.Second}
	})
	resp, err := http.Post("http://"+addr+"/v1/verify", "application/json", strings.NewReader(`{"attestationBundle":"QUJD"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("verify after a slow check: %d %s", resp.StatusCode, b)
	}
}

// TestTooManyBodiesUnavailable: past MaxBodies bodies being received, a
// request with a body answers 503 unavailable with Retry-After at once;
// one without a body is served.
func TestTooManyBodiesUnavailable(t *testing.T) {
	addr, reads, token := bodyServer(t, func(c *server.Config) { c.MaxBodies = 2 })
	declare(t, addr, "/v1/process", token, 100_000, "")
	declare(t, addr, "/v1/process", token, 100_000, "")
	waitReads(t, reads, 2)

	conn := declare(t, addr, "/v1/process", token, 5000, `{"data":{},"outputFormat":"fhir_r4"}`+strings.Repeat(" ", 5000-37))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantProblem(t, resp, b, acds.ProblemUnavailable)
	if resp.Header.Get("Retry-After") == "" {
		t.Fatalf("503 without Retry-After: %v %s", resp.Header, b)
	}

	hr, err := http.Get("http://" + addr + "/v1/health")
	if err != nil {
		t.Fatal(err)
	}
	hr.Body.Close()
	if hr.StatusCode != http.StatusOK {
		t.Fatalf("health while bodies are full: %d", hr.StatusCode)
	}
}

// TestNewHTTPServerDefaults: the helper sets the connection limits.
func TestNewHTTPServerDefaults(t *testing.T) {
	hs := server.NewHTTPServer(http.NotFoundHandler(), server.HTTPOptions{})
	if hs.ReadHeaderTimeout != server.DefaultReadHeaderTimeout || hs.IdleTimeout != server.DefaultIdleTimeout ||
		hs.MaxHeaderBytes != server.DefaultMaxHeaderBytes {
		t.Fatalf("NewHTTPServer: %+v", hs)
	}
	hs = server.NewHTTPServer(http.NotFoundHandler(), server.HTTPOptions{ReadHeaderTimeout: time.Second, IdleTimeout: 2 * time.Second, MaxHeaderBytes: 100})
	if hs.ReadHeaderTimeout != time.Second || hs.IdleTimeout != 2*time.Second || hs.MaxHeaderBytes != 100 {
		t.Fatalf("NewHTTPServer with options: %+v", hs)
	}
}

// TestUnreadBodyIsBounded: a request refused before its body is read (here
// 415) leaves the server discarding the rest of that body; the body's
// deadline bounds that too, so a client that declares a body and never
// sends it does not keep the connection.
func TestUnreadBodyIsBounded(t *testing.T) {
	addr, _, token := bodyServer(t, func(c *server.Config) { c.BodyIdleTimeout = 300 * time.Millisecond })
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/process HTTP/1.1\r\nHost: acds\r\nAuthorization: Bearer %s\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n", token)
	got := readUntilClosed(t, conn, 10*time.Second)
	if !strings.Contains(got, " 415 ") {
		t.Fatalf("answer %q; want 415", got)
	}
}

// TestCompressedTransferEncodingRefused pins a decision (issue 15): a
// request body with a transfer coding other than chunked ("gzip,
// chunked") is refused by net/http with 501 before the Handler runs. ACDS
// keeps it so: a compressed body is a decompression bomb that the body
// limits, counted in received bytes, could not bound; clients send JSON
// uncompressed.
func TestCompressedTransferEncodingRefused(t *testing.T) {
	addr, _, token := bodyServer(t, nil)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/process HTTP/1.1\r\nHost: acds\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", token)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotImplemented {
		t.Fatalf("gzip transfer coding: %d, want 501", resp.StatusCode)
	}
}
