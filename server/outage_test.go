package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/stores/sqlstore"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
)

// linkProxy is a TCP proxy between the server and its database whose link
// can be black-holed (connections stay open, no byte passes either way,
// new connections are accepted and hang), dropped (every connection is
// closed and new ones are closed at once) and resumed.
type linkProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cond  *sync.Cond
	mode  int // linkPass, linkHole, linkDrop
	conns map[net.Conn]bool
}

const (
	linkPass = iota
	linkHole
	linkDrop
)

func startLinkProxy(t *testing.T, target string) *linkProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &linkProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.cond = sync.NewCond(&p.mu)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.set(linkDrop)
	})
	return p
}

func (p *linkProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

// track adds c to the connections a drop closes; false when dropping.
func (p *linkProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == linkDrop {
		return false
	}
	p.conns[c] = true
	return true
}

// pass waits while the link is black-holed; false once it is dropped.
func (p *linkProxy) pass() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.mode == linkHole {
		p.cond.Wait()
	}
	return p.mode == linkPass
}

func (p *linkProxy) handle(c net.Conn) {
	if !p.track(c) || !p.pass() {
		c.Close()
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(up) {
		c.Close()
		if up != nil {
			up.Close()
		}
		return
	}
	go p.copy(up, c)
	p.copy(c, up)
}

func (p *linkProxy) copy(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.pass() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// set switches the link's mode; dropping closes every connection.
func (p *linkProxy) set(mode int) {
	p.mu.Lock()
	p.mode = mode
	var conns []net.Conn
	if mode == linkDrop {
		for c := range p.conns {
			conns = append(conns, c)
		}
		p.conns = map[net.Conn]bool{}
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// call sends one request with a 10 s client timeout: a server that holds
// a request longer than that fails the test.
func call(t *testing.T, h *harness, method, path, token string, body any) (*http.Response, []byte, time.Duration) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, h.ts.URL+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c := &http.Client{Timeout: 10 * time.Second}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s during the outage: %v (the server held the request)", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b, time.Since(start)
}

func wantUnavailable(t *testing.T, what string, resp *http.Response, b []byte) {
	t.Helper()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("%s: %d (Retry-After %q) %s; want 503 with Retry-After", what, resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	if p := decode[acds.Problem](t, b); p.Code() != acds.ProblemUnavailable {
		t.Fatalf("%s: problem %s; want unavailable", what, p.Type)
	}
}

func wantHealth(t *testing.T, h *harness, status int, value string) {
	t.Helper()
	resp, b, _ := call(t, h, "GET", "/v1/health", "", nil)
	hl := decode[acds.Health](t, b)
	if resp.StatusCode != status || hl.Status != value || hl.Version == "" || hl.Uptime == "" || hl.Enclave == "" {
		t.Fatalf("health = %d %s; want %d with status %q and every SPEC field", resp.StatusCode, b, status, value)
	}
}

// TestPostgresOutage (issue 15): the link to PostgreSQL is black-holed,
// then dropped, then restored, through a TCP proxy. While it is down every
// request that needs the store answers 503 unavailable with Retry-After
// within the store deadline (not after TCP gives up) and /v1/health says
// "degraded" with 503; once it is back the server recovers by itself, and
// the request that was being processed when the link went completes:
// nothing accepted is lost.
func TestPostgresOutage(t *testing.T) {
	dsn := postgresDSN(t)
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		t.Skipf("ACDS_TEST_POSTGRES is not a postgres:// URL with a host; the proxy needs one")
	}
	proxy := startLinkProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	st, err := sqlstore.OpenPostgres(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })

	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	var calls atomic.Int32
	h := newHarness(t, func(c *server.Config) {
		c.Store, c.StoreTimeout, c.Lease, c.Workers = st, time.Second, time.Second, 2
		c.Pipeline = &servertest.Pipeline{Hook: func(ctx context.Context, _ []byte) error {
			if calls.Add(1) == 1 {
				entered <- struct{}{}
				<-release
			}
			return nil
		}}
	})
	sess := h.anon()
	resp, b := h.do("POST", "/v1/process", sess.Token, processBody(acds.OutputFHIRR4))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("process: %d %s", resp.StatusCode, b)
	}
	inFlight := decode[acds.Accepted](t, b).RequestID
	<-entered
	wantHealth(t, h, http.StatusOK, server.HealthHealthy)

	proxy.set(linkHole)
	resp, b, took := call(t, h, "POST", "/v1/process", sess.Token, processBody(acds.OutputFHIRR4))
	wantUnavailable(t, "process with the database black-holed", resp, b)
	t.Logf("black-holed database: 503 after %v", took)
	resp, b, _ = call(t, h, "GET", "/v1/requests", sess.Token, nil)
	wantUnavailable(t, "list with the database black-holed", resp, b)
	resp, b, _ = call(t, h, "POST", "/v1/auth/anon", "", nil)
	wantUnavailable(t, "anon with the database black-holed", resp, b)
	wantHealth(t, h, http.StatusServiceUnavailable, server.HealthDegraded)
	close(release) // the in-flight request ends; its write cannot reach the database

	proxy.set(linkDrop)
	resp, b, _ = call(t, h, "GET", "/v1/requests/"+inFlight, sess.Token, nil)
	wantUnavailable(t, "get with the database link dropped", resp, b)
	wantHealth(t, h, http.StatusServiceUnavailable, server.HealthDegraded)

	proxy.set(linkPass)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, b, _ := call(t, h, "GET", "/v1/health", "", nil)
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health still %d %s 30 s after the database came back", resp.StatusCode, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantHealth(t, h, http.StatusOK, server.HealthHealthy)
	resp, b = h.do("POST", "/v1/process", sess.Token, processBody(acds.OutputFHIRR4Deidentified))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("process after recovery: %d %s", resp.StatusCode, b)
	}
	after := decode[acds.Accepted](t, b).RequestID
	for _, id := range []string{inFlight, after} {
		if r := h.wait(sess.Token, id, 30*time.Second); r.Status != acds.StatusCompleted {
			t.Fatalf("request %s after the outage: %+v %+v", id, r, r.Error)
		}
	}
}
