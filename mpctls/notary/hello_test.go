package notary

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/acds-project/acds/mpctls"
)

// captureHello returns the first record a crypto/tls client with cfg sends.
func captureHello(t testing.TB, cfg *tls.Config) []byte {
	t.Helper()
	c, s := net.Pipe()
	defer c.Close()
	defer s.Close()
	go func() {
		tc := tls.Client(c, cfg)
		tc.SetDeadline(time.Now().Add(5 * time.Second))
		tc.Handshake()
	}()
	s.SetDeadline(time.Now().Add(5 * time.Second))
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(s, hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint16(hdr[3:]))
	if _, err := io.ReadFull(s, body); err != nil {
		t.Fatal(err)
	}
	return append(hdr, body...)
}

func record(dir mpctls.Direction, seq uint64, raw []byte) mpctls.Record {
	return mpctls.Record{Dir: dir, Seq: seq, Type: raw[0], Version: binary.BigEndian.Uint16(raw[1:3]), Raw: raw}
}

// withExtension returns a ClientHello record with one more extension.
func withExtension(t testing.TB, rec []byte, typ uint16, data []byte) []byte {
	t.Helper()
	body := rec[5+4:]
	r := &reader{b: body}
	r.u16()
	r.take(32)
	r.vec8()
	r.vec16()
	r.vec8()
	extStart := len(body) - len(r.b)
	exts := r.vec16()
	if r.bad {
		t.Fatal("cannot parse captured ClientHello")
	}
	ext := binary.BigEndian.AppendUint16(nil, typ)
	ext = binary.BigEndian.AppendUint16(ext, uint16(len(data)))
	ext = append(ext, data...)
	newExts := append(append([]byte(nil), exts...), ext...)
	nb := append([]byte(nil), body[:extStart]...)
	nb = binary.BigEndian.AppendUint16(nb, uint16(len(newExts)))
	nb = append(nb, newExts...)
	msg := []byte{msgClientHello, byte(len(nb) >> 16), byte(len(nb) >> 8), byte(len(nb))}
	msg = append(msg, nb...)
	out := []byte{recordTypeHandshake, 3, 1, byte(len(msg) >> 8), byte(len(msg))}
	return append(out, msg...)
}

func TestHelloPolicy(t *testing.T) {
	ch := captureHello(t, &tls.Config{ServerName: "p.test", InsecureSkipVerify: true})
	var w helloWatch
	if err := w.observe(record(mpctls.ClientToServer, 0, ch)); err != nil {
		t.Fatalf("plain ClientHello refused: %v", err)
	}
	if w.ch.serverName != "p.test" || w.ch.maxVersion != versionTLS13 {
		t.Fatalf("parsed %+v", w.ch)
	}
	for name, ext := range map[string]struct {
		typ  uint16
		data []byte
	}{
		"pre_shared_key": {extPreSharedKey, []byte{0, 0}},
		"early_data":     {extEarlyData, nil},
		"session_ticket": {extSessionTicket, []byte{1, 2, 3}},
	} {
		var w helloWatch
		err := w.observe(record(mpctls.ClientToServer, 0, withExtension(t, ch, ext.typ, ext.data)))
		if !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v, want ErrRefused", name, err)
		}
	}
	// A hello split over two records is reassembled.
	var w2 helloWatch
	msg := ch[5:]
	a := append([]byte{22, 3, 1, 0, 10}, msg[:10]...)
	rest := msg[10:]
	b := append([]byte{22, 3, 1, byte(len(rest) >> 8), byte(len(rest))}, rest...)
	if err := w2.observe(record(mpctls.ClientToServer, 0, a)); err != nil || w2.ch != nil {
		t.Fatalf("first fragment: %v %v", err, w2.ch)
	}
	if err := w2.observe(record(mpctls.ClientToServer, 1, b)); err != nil || w2.ch == nil {
		t.Fatalf("second fragment: %v", err)
	}
	// Non-handshake first record, and a server speaking first.
	var w3 helloWatch
	if err := w3.observe(record(mpctls.ClientToServer, 0, []byte{23, 3, 3, 0, 1, 0})); !errors.Is(err, ErrRefused) {
		t.Fatalf("application data first: %v", err)
	}
	var w4 helloWatch
	if err := w4.observe(record(mpctls.ServerToClient, 0, []byte{22, 3, 3, 0, 4, 2, 0, 0, 0})); !errors.Is(err, ErrRefused) {
		t.Fatalf("server hello first: %v", err)
	}
}

// FuzzHelloWatch feeds arbitrary record sequences to the notary's
// in-flight policy: it must refuse or accept, never panic or grow without
// bound. Input: repeated [direction][type][length u16][fragment].
func FuzzHelloWatch(f *testing.F) {
	enc := func(recs ...[]byte) []byte {
		var out []byte
		for i, r := range recs {
			dir := byte(mpctls.ClientToServer)
			if i%2 == 1 {
				dir = byte(mpctls.ServerToClient)
			}
			out = append(out, dir, r[0])
			out = binary.BigEndian.AppendUint16(out, uint16(len(r)-5))
			out = append(out, r[5:]...)
		}
		return out
	}
	ch13 := captureHello(f, &tls.Config{ServerName: "f.test", InsecureSkipVerify: true})
	ch12 := captureHello(f, &tls.Config{ServerName: "f.test", InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12})
	sh := []byte{22, 3, 3, 0, 42 + 4 + 6, 2, 0, 0, 42 + 6, 3, 3}
	sh = append(sh, make([]byte, 32)...)
	sh = append(sh, 0, 0x13, 0x01, 0, 0, 6, 0, 43, 0, 2, 3, 4)
	f.Add(enc(ch13, sh))
	f.Add(enc(ch12))
	f.Add(enc(withExtension(f, ch13, extPreSharedKey, []byte{0, 0})))
	f.Add([]byte{1, 22, 0, 4, 1, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		var w helloWatch
		var seq [3]uint64
		for i := 0; len(data) >= 4 && i < 64; i++ {
			dir := mpctls.Direction(1 + data[0]%2)
			typ := data[1]
			n := int(binary.BigEndian.Uint16(data[2:4]))
			data = data[4:]
			if n > len(data) {
				n = len(data)
			}
			raw := append([]byte{typ, 3, 3, byte(n >> 8), byte(n)}, data[:n]...)
			data = data[n:]
			if err := w.observe(record(dir, seq[dir], raw)); err != nil {
				if !errors.Is(err, ErrRefused) {
					t.Fatalf("error outside ErrRefused: %v", err)
				}
				return
			}
			seq[dir]++
			if len(w.cbuf) > maxHelloBytes+1<<16 || len(w.sbuf) > maxHelloBytes+1<<16 {
				t.Fatalf("reassembly buffer grew to %d/%d", len(w.cbuf), len(w.sbuf))
			}
		}
	})
}
