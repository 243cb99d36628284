// Package demoportaltest runs the demo portal (internal/demo/demoportal) on a
// loopback listener for the length of a test.
//
//	p := demoportaltest.Start(t, demoportal.Options{Patients: 2})
//	rec, err := conn.Fetch(ctx, p.Client, portal.Request{PortalURL: p.URL, …})
package demoportaltest

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"testing"

	"github.com/acds-project/acds/internal/demo/demoportal"
	"github.com/acds-project/acds/portal"
)

// Server is a demo portal serving HTTPS on 127.0.0.1.
type Server struct {
	*demoportal.Portal
	// URL is the FHIR base URL, https://localhost:PORT/fhir: a DNS name,
	// as notarized fetches need one for SNI.
	URL string
	// Port is the listener's port.
	Port string
	// Client trusts the portal's CA and dials through
	// portal.Guard{AllowPrivate: true}.Transport.
	Client *http.Client
}

// Start makes a demo portal with opts (zero values as demoportal.New has
// them) and serves it until the test ends; it fails the test when the
// portal cannot start or its server ends with an error.
func Start(t testing.TB, opts demoportal.Options) *Server {
	t.Helper()
	d, err := demoportal.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Serve(l) }()
	t.Cleanup(func() {
		d.Close()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("demo portal: %v", err)
		}
	})
	_, port, _ := net.SplitHostPort(l.Addr().String())
	tr := portal.Guard{AllowPrivate: true}.Transport(&tls.Config{RootCAs: d.CertPool()})
	t.Cleanup(tr.CloseIdleConnections)
	return &Server{Portal: d, URL: "https://localhost:" + port + "/fhir", Port: port, Client: &http.Client{Transport: tr}}
}
