package mpctls

import (
	"bytes"
	"crypto/tls"
	"errors"
	"slices"
	"testing"
)

func TestServerEpochs(t *testing.T) {
	for _, id := range []uint16{0x1301, 0x1302, 0x1303} {
		s, _ := SuiteByID(id)
		recs, starts, secret, _ := keyUpdateSession(t, s)
		got, err := ServerEpochs(recs, VersionTLS13, id, secret, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, starts) {
			t.Fatalf("%s: epochs %v, want %v", s.Name, got, starts)
		}
		bad := cloneRecords(recs)
		bad[len(bad)-1].Raw[HeaderLen] ^= 1
		if _, err := ServerEpochs(bad, VersionTLS13, id, secret, 1); !errors.Is(err, ErrDecrypt) {
			t.Fatalf("flipped bit: %v", err)
		}
		if _, err := ServerEpochs(append(cloneRecords(recs[:4]), recs[5:]...), VersionTLS13, id, secret, 1); !errors.Is(err, ErrSequence) {
			t.Fatalf("dropped record: %v", err)
		}
	}
	// Real sessions: one epoch, NewSessionTickets included.
	for _, c := range goCases() {
		cap := c.capture(t, bytes.Repeat([]byte("x"), 30000))
		hs, err := VerifyHandshake(cap.records, cap.disclosure(), hsOpts(t))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ServerEpochs(cap.records, hs.Version, hs.CipherSuite, serverSecret(t, cap, hs), hs.ServerProtectedFrom)
		if err != nil || !slices.Equal(got, []uint64{hs.ServerProtectedFrom}) {
			t.Fatalf("%s: %v %v", c.name, got, err)
		}
		if hs.Version == tls.VersionTLS13 {
			if _, err := ServerEpochs(cap.records, hs.Version, hs.CipherSuite, cap.secrets["CLIENT_TRAFFIC_SECRET_0"], hs.ServerProtectedFrom); !errors.Is(err, ErrDecrypt) {
				t.Fatalf("client secret: %v", err)
			}
		}
	}
}
