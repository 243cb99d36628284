package portal_test

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/demo/demoportal"
	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/mpctls/notary/notarytest"
	"github.com/acds-project/acds/portal"
)

// countedConn is a connection to the notary that counts itself open
// until its first Close.
type countedConn struct {
	net.Conn
	open *atomic.Int64
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.open.Add(-1) })
	return c.Conn.Close()
}

// TestNotarizedFetchLeavesNoConnection: a fetch closes every connection
// it opened to the notary before it returns, on success and on failure.
// The prover's control connections (session open and finalize) were left
// idle in a transport of their own, one per fetch, for its 30 s idle
// timeout: under load, acds serve held a connection, three goroutines and
// their buffers per fetch of the last 30 s (673 after 15 s of the load
// suite), on both ends of the in-process notary.
func TestNotarizedFetchLeavesNoConnection(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fail    demoportal.Failures
		wantErr error
	}{{"success", demoportal.Failures{}, nil}, {"locked account", demoportal.Failures{Locked: true}, portal.ErrAccountLocked}} {
		t.Run(tc.name, func(t *testing.T) {
			p := startDemo(t, demoportal.Options{Patients: 1, Hosts: []string{portalHost}, Failures: tc.fail})
			n := notarytest.StartNotary(t, notary.Config{Roots: p.CertPool(), AllowAddr: notarytest.LoopbackOnly})
			var open, dialled atomic.Int64
			dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				open.Add(1)
				dialled.Add(1)
				return &countedConn{Conn: c, open: &open}, nil
			}
			f := &portal.Fetcher{
				Connector: *testConnector(),
				NewTransport: portal.Notarized{Notary: n.Addr, NotaryKeys: []ed25519.PublicKey{n.Key}, DialNotary: dial,
					TLSConfig: &tls.Config{RootCAs: p.CertPool()}, Guard: portal.Guard{AllowPrivate: true}}.Factory(),
			}
			base := "https://" + portalHost + ":" + p.Port + "/fhir"
			for i := 0; i < 3; i++ {
				_, err := f.Fetch(context.Background(), portal.Request{SystemType: acds.SystemSMARTPassword, PortalURL: base,
					RecordID: demoportal.PatientID(0), Credentials: demoCreds})
				if !errors.Is(err, tc.wantErr) { // errors.Is(nil, nil) holds
					t.Fatalf("fetch %d: error %v, want %v", i, err, tc.wantErr)
				}
				if o := open.Load(); o != 0 {
					t.Fatalf("after fetch %d: %d of %d connections to the notary still open", i, o, dialled.Load())
				}
			}
			if dialled.Load() == 0 {
				t.Fatal("no connection to the notary was dialled")
			}
		})
	}
}
