package mpc

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"testing"
)

// ecdhProg runs KeyShare, hands the client share to a "server" (a
// crypto/ecdh key), runs ECDH on the server's share and opens the
// pre-master secret to both, which a real client never does; here it
// checks the value against crypto/ecdh's.
func ecdhProg(t *testing.T, server *ecdh.PrivateKey, clientShare, pms *[]byte) party {
	return func(ctx context.Context, s *Session) error {
		pub, err := s.KeyShare(ctx)
		if err != nil {
			return err
		}
		*clientShare = pub
		v, err := s.ECDH(ctx, server.PublicKey().Bytes())
		if err != nil {
			return err
		}
		*pms, err = s.Open(ctx, v, ToBoth)
		return err
	}
}

func TestECDH(t *testing.T) {
	server, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var shareP, shareN, pmsP, pmsN []byte
	must(t)(run(t, Config{}, nil, nil, ecdhProg(t, server, &shareP, &pmsP), ecdhProg(t, server, &shareN, &pmsN)))
	if !bytes.Equal(shareP, shareN) {
		t.Fatal("the parties disagree on the client share")
	}
	client, err := ecdh.P256().NewPublicKey(shareP)
	if err != nil {
		t.Fatal(err)
	}
	want, err := server.ECDH(client)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pmsP, want) || !bytes.Equal(pmsN, want) {
		t.Fatalf("pre-master secret %x / %x, want %x", pmsP, pmsN, want)
	}
}
