package mpctls_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/acds-project/acds/mpctls"
)

// A notary feeds the records it relays into a Transcript, signs a
// Statement over its root, and a verifier checks the statement offline
// with the notary's public key.
func Example() {
	notaryKey := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{42}, 32))

	// The recorded client and server streams (a real session has many
	// records; two handshake headers stand in for them here).
	client := []byte{22, 3, 1, 0, 4, 1, 0, 0, 0}
	server := []byte{22, 3, 3, 0, 4, 2, 0, 0, 0}
	var tr mpctls.Transcript
	for _, s := range []struct {
		dir  mpctls.Direction
		data []byte
	}{{mpctls.ClientToServer, client}, {mpctls.ServerToClient, server}} {
		rr := mpctls.NewRecordReader(bytes.NewReader(s.data), s.dir)
		r, err := rr.Next()
		if err != nil {
			panic(err)
		}
		if err := tr.Add(r); err != nil {
			panic(err)
		}
	}

	start := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	st := &mpctls.Statement{
		SessionID:       [16]byte{1},
		Start:           start,
		End:             start.Add(2 * time.Second),
		SNI:             "portal.example.org",
		Address:         "192.0.2.10:443",
		Version:         mpctls.VersionTLS13,
		CipherSuite:     0x1301, // TLS_AES_128_GCM_SHA256
		CertChainDigest: sha256.Sum256([]byte("the server's chain")),
		Root:            tr.Root(),
		ClientRecords:   tr.Records(mpctls.ClientToServer),
		ClientBytes:     tr.Bytes(mpctls.ClientToServer),
		ServerRecords:   tr.Records(mpctls.ServerToClient),
		ServerBytes:     tr.Bytes(mpctls.ServerToClient),
	}
	signed, err := st.Sign(notaryKey)
	if err != nil {
		panic(err)
	}

	trusted := []ed25519.PublicKey{notaryKey.Public().(ed25519.PublicKey)}
	got, err := mpctls.VerifyStatement(signed, trusted, mpctls.Expect{SNI: "portal.example.org"})
	if err != nil {
		panic(err)
	}
	fmt.Println(got.SNI, got.Address, got.ServerRecords, len(signed) <= 1024)
	// Output: portal.example.org 192.0.2.10:443 1 true
}
