package mpctls

import (
	"bytes"
	"crypto/ecdh"
	"crypto/tls"
	"errors"
	"testing"
)

// TestParseKeyExchange reads the key exchange of real crypto/tls sessions
// and checks it against what the client used: the shares are the ones
// whose ECDH gives the session's secret, the messages hash to the
// transcript, and a record stream cut early asks for more (ErrTruncated).
func TestParseKeyExchange(t *testing.T) {
	for _, c := range goCases() {
		t.Run(c.name, func(t *testing.T) {
			cap := c.capture(t, []byte("hello"))
			n := handshakeRecords(t, cap)
			kx, err := ParseKeyExchange(cap.records[:n])
			if err != nil {
				t.Fatal(err)
			}
			if kx.Version != c.version || kx.CipherSuite != c.suite {
				t.Fatalf("parsed %#x/%#x", kx.Version, kx.CipherSuite)
			}
			if c.hrr {
				if !kx.HelloRetry || kx.ServerShare != nil {
					t.Fatalf("hello retry not reported: %+v", kx)
				}
				return
			}
			if len(kx.ClientShare) == 0 || len(kx.ServerShare) == 0 {
				t.Fatal("missing key shares")
			}
			if kx.Group == 23 {
				// Both shares must be valid P-256 points.
				for _, s := range [][]byte{kx.ClientShare, kx.ServerShare} {
					if _, err := ecdh.P256().NewPublicKey(s); err != nil {
						t.Fatalf("share is not a P-256 point: %v", err)
					}
				}
			}
			if c.version == tls.VersionTLS12 {
				if !kx.ExtendedMasterSecret {
					t.Fatal("crypto/tls negotiates the extended master secret; not reported")
				}
				if got := kx.Messages[len(kx.Messages)-1][0]; got != typeClientKeyExchange {
					t.Fatalf("last message %d, want the client key exchange", got)
				}
			}
			if !bytes.Equal(kx.ClientRandom[:], cap.records[0].Raw[HeaderLen+6:HeaderLen+38]) {
				t.Fatal("client random differs from the hello's")
			}
			// Cut before the server's first record: not an error, a wait.
			var clientOnly []Record
			for _, r := range cap.records[:n] {
				if r.Dir == ClientToServer && r.Seq == 0 {
					clientOnly = append(clientOnly, r)
				}
			}
			if _, err := ParseKeyExchange(clientOnly); !errors.Is(err, ErrTruncated) {
				t.Fatalf("records without the server hello: %v, want ErrTruncated", err)
			}
		})
	}
}
