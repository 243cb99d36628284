package prover_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"

	"github.com/acds-project/acds/mpctls"
	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/mpctls/prover"
)

// loopback resolves every name to 127.0.0.1, so the example stays local.
type loopback struct{}

func (loopback) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// Example fetches a resource from a portal through a notary, finalizes
// the session and verifies a presentation of the response, as a third
// party would.
func Example() {
	// A portal: a local HTTPS server whose certificate is for example.com.
	portal := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"resourceType":"Patient","id":"1"}`)
	}))
	portal.StartTLS()
	defer portal.Close()
	roots := x509.NewCertPool()
	roots.AddCert(portal.Certificate())
	_, port, _ := net.SplitHostPort(portal.Listener.Addr().String())

	// The notary, on loopback.
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	n, err := notary.New(notary.Config{Key: key, Roots: roots, Resolver: loopback{}})
	if err != nil {
		panic(err)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	go n.Serve(l)
	defer n.Close()
	trusted := []ed25519.PublicKey{n.PublicKey()}

	// The prover fetches through it.
	d := &prover.Dialer{Notary: l.Addr().String(), NotaryKeys: trusted, TLSConfig: &tls.Config{RootCAs: roots}}
	tr := &http.Transport{DialTLSContext: d.DialTLSContext}
	resp, err := (&http.Client{Transport: tr}).Get("https://example.com:" + port + "/Patient/1")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	tr.CloseIdleConnections()
	results, err := d.FinalizeAll(context.Background())
	if err != nil {
		panic(err)
	}

	// Anyone holding the statement and a presentation can check the data.
	p, err := results[0].PresentAll()
	if err != nil {
		panic(err)
	}
	disclosed, err := mpctls.VerifyPresentation(results[0].Statement, p, trusted)
	if err != nil {
		panic(err)
	}
	fmt.Println(disclosed.Statement.SNI, disclosed.Statement.CertSubject, bytes.Contains(disclosed.Data(), body))
	// Output: example.com O=Acme Co true
}
