package prover

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds/internal/testrig/netem"
	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/mpctls/notary/notarytest"
)

// The exchange of the WAN benchmark, as in the anchors' benchmarks: one
// HTTP request of wanRequest bytes and its response of wanResponse bytes
// (status line, headers and body together).
const (
	wanRequest  = 1 << 10
	wanResponse = 2 << 10
)

// wanHandler answers every request with exactly wanResponse bytes.
func wanHandler() http.Handler {
	const head = "HTTP/1.1 200 OK\r\nContent-Length: 0000\r\nContent-Type: application/octet-stream\r\n\r\n"
	body := strings.Repeat("r", wanResponse-len(head))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header()["Date"] = nil
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		io.WriteString(w, body)
	})
}

// wanExchange sends one request of exactly wanRequest bytes on c and
// reads the whole response.
func wanExchange(c net.Conn, host string) error {
	head := "POST /wan HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 0000\r\n\r\n"
	body := strings.Repeat("q", wanRequest-len(head))
	req := strings.Replace(head, "0000", fmt.Sprintf("%04d", len(body)), 1) + body
	if _, err := io.WriteString(c, req); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || n != int64(resp.ContentLength) {
		return fmt.Errorf("status %d, %d of %d body bytes", resp.StatusCode, n, resp.ContentLength)
	}
	return nil
}

// wanLink is the prover–notary link of the issue's target: 100 Mbit/s
// and 25 ms round trip.
func wanLink() *netem.Link {
	p := netem.Symmetric(25*time.Millisecond, 100e6)
	return netem.New(p, p)
}

// wanSession runs one notarized exchange over link with d, from the
// dial to a verified statement, and returns its wall time.
func wanSession(tb testing.TB, d *Dialer, link *netem.Link, host, port string) time.Duration {
	link.Reset()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := d.DialTLSContext(ctx, "tcp", net.JoinHostPort(host, port))
	if err != nil {
		tb.Fatal(err)
	}
	if err := wanExchange(c, host); err != nil {
		tb.Fatal(err)
	}
	c.Close()
	res, err := d.FinalizeAll(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	if len(res) != 1 {
		tb.Fatalf("%d results", len(res))
	}
	el := time.Since(start)
	d.CloseIdleConnections()
	return el
}

// BenchmarkWAN runs the exchange of the issue's target (a 1 KB request
// and a 2 KB response) over an emulated prover–notary link of 100 Mbit/s
// and 25 ms RTT (internal/testrig/netem; the portal is next to the notary), from
// the dial to a verified statement, and reports for each mode
//
//	<mode>-ms        wall time of one notarized exchange
//	<mode>-up-MB     bytes the prover sent over the link (10^6 B)
//	<mode>-down-MB   bytes the prover received over the link
//
// with a fresh TLS session (and fresh connections to the notary) per
// exchange, for TLS 1.3 and TLS 1.2.
//
//	go test -run '^$' -bench BenchmarkWAN -benchtime 5x ./mpctls/prover/
func BenchmarkWAN(b *testing.B) {
	ca := notarytest.NewCA(b)
	const host = "wan.test"
	n := notarytest.StartNotary(b, notary.Config{Roots: ca.Pool()})
	port := notarytest.StartTLSServer(b, &tls.Config{Certificates: []tls.Certificate{ca.Issue(b, notarytest.ECDSA, host)}}, wanHandler())
	for _, v := range []struct {
		name    string
		version uint16
	}{{"tls13", tls.VersionTLS13}, {"tls12", tls.VersionTLS12}} {
		b.Run(v.name, func(b *testing.B) {
			link := wanLink()
			proxy := &Dialer{
				Notary: n.Addr, NotaryKeys: []ed25519.PublicKey{n.Key},
				TLSConfig:  &tls.Config{RootCAs: ca.Pool(), MinVersion: v.version, MaxVersion: v.version},
				DialNotary: link.Dialer((&net.Dialer{}).DialContext),
			}
			var wall time.Duration
			var up, down int64
			for i := 0; i < b.N; i++ {
				wall += wanSession(b, proxy, link, host, port)
				u, d := link.Bytes()
				up += u
				down += d
			}
			N := float64(b.N)
			b.ReportMetric(float64(wall.Microseconds())/1e3/N, "proxy-ms")
			b.ReportMetric(float64(up)/1e6/N, "proxy-up-MB")
			b.ReportMetric(float64(down)/1e6/N, "proxy-down-MB")
		})
	}
}
