package prover

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/acds-project/acds/mpctls"
	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/mpctls/notary/notarytest"
)

// How rawServer ends a connection.
const (
	endFIN       = iota // FIN after the response: no close_notify
	endReset            // RST after the response (SO_LINGER 0)
	endMidRecord        // FIN inside a record
)

// rawServer answers one HTTP request per connection over TLS and then ends
// the TCP connection itself, without close_notify, as end says.
func rawServer(t *testing.T, cfg *tls.Config, end int) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := tls.Server(c, cfg)
				tc.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := http.ReadRequest(bufio.NewReader(tc)); err != nil {
					return
				}
				fmt.Fprintf(tc, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
				switch end {
				case endMidRecord:
					c.Write([]byte{23, 3, 3, 0, 40, 1, 2, 3}) // header promises 40 bytes, 3 follow
				case endReset:
					c.(*net.TCPConn).SetLinger(0)
					return
				}
				// Half-close c, not tc (no close_notify), and read what the
				// client still sends so that the close is a FIN, not a reset.
				c.(*net.TCPConn).CloseWrite()
				io.Copy(io.Discard, c)
			}()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

func TestTruncationWithoutCloseNotify(t *testing.T) {
	ca := notarytest.NewCA(t)
	const host = "trunc.test"
	cfg := &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, notarytest.ECDSA, host)}}
	n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool()})

	for name, end := range map[string]int{"FIN at a record boundary": endFIN, "reset at a record boundary": endReset} {
		t.Run(name, func(t *testing.T) { boundaryEnd(t, n, ca, host, rawServer(t, cfg, end)) })
	}

	t.Run("inside a record", func(t *testing.T) {
		port := rawServer(t, cfg, endMidRecord)
		d := &Dialer{Notary: n.Addr, NotaryKeys: []ed25519.PublicKey{n.Key}, TLSConfig: &tls.Config{RootCAs: ca.Pool()}}
		tr := &http.Transport{DialTLSContext: d.DialTLSContext}
		resp, err := (&http.Client{Transport: tr}).Get("https://" + host + ":" + port + "/")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		tr.CloseIdleConnections()
		_, err = d.FinalizeAll(context.Background())
		if !errors.Is(err, mpctls.ErrTruncated) && !errors.Is(err, ErrNotary) {
			t.Fatalf("finalize of a session cut inside a record: %v, want ErrTruncated or a notary refusal", err)
		}
	})
}

// boundaryEnd fetches from a server that ends without close_notify at a
// record boundary: the session is notarized, and says it has no close_notify.
func boundaryEnd(t *testing.T, n *notarytest.Notary, ca *notarytest.CA, host, port string) {
	fr := fetch(t, n, ca.Pool(), host, port, nil, "/")
	r := fr.results[0]
	if r.CloseNotify {
		t.Fatal("close_notify reported for a server that sent none")
	}
	p, err := r.PresentAll()
	if err != nil {
		t.Fatal(err)
	}
	d, err := mpctls.VerifyPresentation(r.Statement, p, []ed25519.PublicKey{n.Key})
	if err != nil {
		t.Fatal(err)
	}
	if d.CloseNotify {
		t.Fatal("presentation claims a close_notify")
	}
	if err := d.CheckComplete(); !errors.Is(err, mpctls.ErrTruncated) {
		t.Fatalf("CheckComplete without close_notify: %v, want ErrTruncated", err)
	}
}
