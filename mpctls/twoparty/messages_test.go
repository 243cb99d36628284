package twoparty

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/acds-project/acds/mpctls"
)

var seedRequests = []request{
	{kind: reqServerHello}, {kind: reqServerFlight}, {kind: reqClientKeyExchange}, {kind: reqServerFinished},
	{kind: reqReveal, epoch: 3, after: 1 << 40}, {kind: reqReveal, end: true}, {kind: reqNextEpoch}, {kind: reqFinish},
}

// TestMessagesRoundTrip: every request and answer parses back to itself.
func TestMessagesRoundTrip(t *testing.T) {
	for _, r := range seedRequests {
		got, err := parseRequest(r.marshal())
		if err != nil || got != r {
			t.Fatalf("request %+v came back as %+v, %v", r, got, err)
		}
	}
	cp := bytes.Repeat([]byte{7}, mpctls.CheckpointSize)
	for _, a := range []answer{{ok: true}, {ok: true, checkpoint: cp}, {reason: "no"}, {reason: strings.Repeat("é", 200)}} {
		got, err := parseAnswer(a.marshal())
		if err != nil || got.ok != a.ok || !bytes.Equal(got.checkpoint, a.checkpoint) || !strings.HasPrefix(a.reason, got.reason) {
			t.Fatalf("answer %+v came back as %+v, %v", a, got, err)
		}
	}
}

// FuzzMessages: the parsers of both sides' messages return a typed error
// or a message that encodes back to the same bytes.
func FuzzMessages(f *testing.F) {
	for _, r := range seedRequests {
		f.Add(r.marshal())
	}
	f.Add(answer{ok: true, checkpoint: make([]byte, mpctls.CheckpointSize)}.marshal())
	f.Add(answer{reason: "refused"}.marshal())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := parseRequest(b); err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("untyped error %v", err)
			}
		} else if !bytes.Equal(r.marshal(), b) {
			t.Fatalf("request %x re-encodes as %x", b, r.marshal())
		}
		if a, err := parseAnswer(b); err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("untyped error %v", err)
			}
		} else if !bytes.Equal(a.marshal(), b) {
			t.Fatalf("answer %x re-encodes as %x", b, a.marshal())
		}
	})
}
