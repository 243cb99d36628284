package prover

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acds-project/acds/mpctls"
	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/mpctls/notary/notarytest"
)

// fetchResult is what one notarized fetch produced.
type fetchResult struct {
	bodies  [][]byte
	results []*Result
	dialer  *Dialer
}

// fetch GETs each path from https://host:port through the notary, on one
// keep-alive connection, closes it and finalizes every session.
func fetch(t testing.TB, n *notarytest.Notary, roots *x509.CertPool, host, port string, tcfg *tls.Config, paths ...string) *fetchResult {
	t.Helper()
	fr, err := tryFetch(n, roots, host, port, tcfg, paths...)
	if err != nil {
		t.Fatal(err)
	}
	return fr
}

func tryFetch(n *notarytest.Notary, roots *x509.CertPool, host, port string, tcfg *tls.Config, paths ...string) (*fetchResult, error) {
	if tcfg == nil {
		tcfg = &tls.Config{}
	}
	tcfg = tcfg.Clone()
	tcfg.RootCAs = roots
	d := &Dialer{Notary: n.Addr, NotaryKeys: []ed25519.PublicKey{n.Key}, TLSConfig: tcfg}
	tr := &http.Transport{DialTLSContext: d.DialTLSContext, DisableCompression: true, MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1}
	client := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	fr := &fetchResult{dialer: d}
	for _, p := range paths {
		resp, err := client.Get("https://" + host + ":" + port + p)
		if err != nil {
			tr.CloseIdleConnections()
			return nil, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: status %d", p, resp.StatusCode)
		}
		fr.bodies = append(fr.bodies, b)
	}
	tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := d.FinalizeAll(ctx)
	if err != nil {
		return nil, err
	}
	fr.results = res
	return fr, nil
}

// servePayload answers /payload?n=N with N deterministic bytes and
// /chunked with a chunked body; anything else gets "hello".
func servePayload() http.Handler {
	mux := http.NewServeMux()
	var cache sync.Map // size → body, so benchmarks measure TLS, not payload generation
	mux.HandleFunc("/payload", func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscanf(r.URL.Query().Get("n"), "%d", &n)
		if n < 0 || n > 64<<20 {
			http.Error(w, "size", http.StatusBadRequest)
			return
		}
		b, ok := cache.Load(n)
		if !ok {
			b, _ = cache.LoadOrStore(n, payload(n))
		}
		w.Header().Set("Content-Length", fmt.Sprint(n))
		w.Write(b.([]byte))
	})
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		f := w.(http.Flusher)
		for i := 0; i < 5; i++ {
			fmt.Fprintf(w, "chunk %d;", i)
			f.Flush()
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello "+r.URL.Path) })
	return mux
}

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

// checkResult checks a finalized session against what the prover fetched
// and re-verifies its statement independently.
func checkResult(t testing.TB, n *notarytest.Notary, r *Result, host string, version, suite uint16) {
	t.Helper()
	st, err := mpctls.VerifyStatement(r.Statement, []ed25519.PublicKey{n.Key}, mpctls.Expect{SNI: host})
	if err != nil {
		t.Fatalf("statement: %v", err)
	}
	if st.Version != version || st.CipherSuite != suite {
		t.Fatalf("statement version %#04x suite %#04x, want %#04x %#04x", st.Version, st.CipherSuite, version, suite)
	}
	if len(r.Statement) > 1024 {
		t.Errorf("statement of %d bytes, goal ≤ 1 KiB", len(r.Statement))
	}
	if !strings.HasPrefix(st.Address, "127.0.0.1:") {
		t.Errorf("statement address %q", st.Address)
	}
	tree, err := mpctls.NewTree(r.Records)
	if err != nil {
		t.Fatal(err)
	}
	if tree.Root() != st.Root {
		t.Fatal("records do not rebuild the statement root")
	}
	// The full presentation round-trips through its encoding and verifies.
	p, err := r.PresentAll()
	if err != nil {
		t.Fatalf("presentation: %v", err)
	}
	enc, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var p2 mpctls.Presentation
	if err := p2.Unmarshal(enc); err != nil {
		t.Fatal(err)
	}
	d, err := mpctls.VerifyPresentation(r.Statement, &p2, []ed25519.PublicKey{n.Key})
	if err != nil {
		t.Fatalf("verify presentation: %v", err)
	}
	if !d.Complete {
		t.Error("full presentation is not Complete")
	}
	if r.CloseNotify != d.CloseNotify {
		t.Errorf("server close_notify: prover saw %v, presentation shows %v", r.CloseNotify, d.CloseNotify)
	}
	if len(d.Data()) != r.AppBytes {
		t.Errorf("presentation discloses %d bytes of application data, prover saw %d", len(d.Data()), r.AppBytes)
	}
	// Selective disclosure: only the first application record.
	apps := r.ApplicationRecords()
	sel, err := r.Presentation(apps[:1])
	if err != nil {
		t.Fatal(err)
	}
	ds, err := mpctls.VerifyPresentation(r.Statement, sel, []ed25519.PublicKey{n.Key})
	if err != nil {
		t.Fatalf("verify selective presentation: %v", err)
	}
	if len(ds.Records) != 1 || ds.Complete || !bytes.HasPrefix(d.Data(), ds.Data()) {
		t.Error("selective presentation discloses the wrong thing")
	}
}

// disclosed returns the application data a full presentation of r
// discloses, verified.
func disclosed(t testing.TB, n *notarytest.Notary, r *Result) []byte {
	t.Helper()
	p, err := r.PresentAll()
	if err != nil {
		t.Fatal(err)
	}
	d, err := mpctls.VerifyPresentation(r.Statement, p, []ed25519.PublicKey{n.Key})
	if err != nil {
		t.Fatal(err)
	}
	return d.Data()
}

func TestInteropGoServers(t *testing.T) {
	ca := notarytest.NewCA(t)
	const host = "portal.test"
	certs := map[notarytest.KeyType]tls.Certificate{
		notarytest.ECDSA: ca.Issue(t, notarytest.ECDSA, host),
		notarytest.RSA:   ca.Issue(t, notarytest.RSA, host),
	}
	n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool()})
	type tc struct {
		name    string
		version uint16
		suite   uint16
		key     notarytest.KeyType
	}
	cases := []tc{
		{"tls13-aes128-ecdsa", tls.VersionTLS13, tls.TLS_AES_128_GCM_SHA256, notarytest.ECDSA},
		{"tls13-aes128-rsa", tls.VersionTLS13, tls.TLS_AES_128_GCM_SHA256, notarytest.RSA},
	}
	for _, s := range mpctls.Suites() {
		if s.Version != mpctls.VersionTLS12 {
			continue
		}
		kt := notarytest.RSA
		if s.ECDSA {
			kt = notarytest.ECDSA
		}
		cases = append(cases, tc{"tls12-" + s.Name, tls.VersionTLS12, s.ID, kt})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			scfg := &tls.Config{Certificates: []tls.Certificate{certs[c.key]}, MinVersion: c.version, MaxVersion: c.version}
			if c.version == tls.VersionTLS12 {
				scfg.CipherSuites = []uint16{c.suite}
			}
			port := notarytest.StartTLSServer(t, scfg, servePayload())
			fr := fetch(t, n, ca.Pool(), host, port, nil, "/a", "/payload?n=40000", "/chunked")
			if len(fr.results) != 1 {
				t.Fatalf("%d sessions for one keep-alive connection, want 1", len(fr.results))
			}
			if string(fr.bodies[0]) != "hello /a" || !bytes.Equal(fr.bodies[1], payload(40000)) || string(fr.bodies[2]) != "chunk 0;chunk 1;chunk 2;chunk 3;chunk 4;" {
				t.Fatal("wrong bodies")
			}
			r := fr.results[0]
			checkResult(t, n, r, host, c.version, c.suite)
			// crypto/tls answers the prover's close_notify with its own,
			// and the prover reads it before the tunnel ends.
			if !r.CloseNotify {
				t.Error("the Go server's close_notify was not seen")
			}
			data := disclosed(t, n, r)
			if !bytes.Contains(data, payload(40000)) || !bytes.Contains(data, []byte("chunk 4;")) || !bytes.Contains(data, []byte("Transfer-Encoding: chunked")) {
				t.Error("disclosed plaintext lacks the responses")
			}
		})
	}
}

func TestInteropHelloRetryRequest(t *testing.T) {
	ca := notarytest.NewCA(t)
	const host = "hrr.test"
	n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool()})
	// The client's first key share is for X25519 (or a hybrid); a server
	// that only accepts P-384 must ask again.
	scfg := &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, notarytest.ECDSA, host)}, MinVersion: tls.VersionTLS13, CurvePreferences: []tls.CurveID{tls.CurveP384}}
	port := notarytest.StartTLSServer(t, scfg, servePayload())
	fr := fetch(t, n, ca.Pool(), host, port, nil, "/x")
	r := fr.results[0]
	checkResult(t, n, r, host, tls.VersionTLS13, tls.TLS_AES_128_GCM_SHA256)
	// Two ServerHellos (HRR + real) are in the clear before encryption.
	var hellos int
	for _, rec := range r.Records {
		if rec.Dir == mpctls.ServerToClient && rec.Type == mpctls.RecordHandshake {
			hellos++
		}
	}
	if hellos != 2 {
		t.Fatalf("%d plaintext server handshake records, want 2 (HelloRetryRequest and ServerHello)", hellos)
	}
}

func TestInteropLargeResponse(t *testing.T) {
	ca := notarytest.NewCA(t)
	const host = "big.test"
	n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool()})
	scfg := &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, notarytest.ECDSA, host)}}
	port := notarytest.StartTLSServer(t, scfg, servePayload())
	const size = 10 << 20
	fr := fetch(t, n, ca.Pool(), host, port, nil, fmt.Sprintf("/payload?n=%d", size))
	if !bytes.Equal(fr.bodies[0], payload(size)) {
		t.Fatal("wrong body")
	}
	r := fr.results[0]
	checkResult(t, n, r, host, tls.VersionTLS13, tls.TLS_AES_128_GCM_SHA256)
	if r.Parsed.ServerBytes < size {
		t.Fatalf("statement counts %d server bytes for a %d-byte body", r.Parsed.ServerBytes, size)
	}
	if !bytes.Contains(disclosed(t, n, r), payload(size)) {
		t.Fatal("disclosed plaintext lacks the body")
	}
}
