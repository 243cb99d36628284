package twoparty

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/acds-project/acds/mpctls"
)

// testRelay is a minimal recording notary for the tests of this package:
// it relays one tunnel between the client and a server on loopback,
// records every record of both directions, and implements Relay. (The
// real one is package notary's session.)
type testRelay struct {
	addr string
	key  ed25519.PrivateKey
	pub  ed25519.PublicKey
	sid  [16]byte

	mu      sync.Mutex
	recs    []mpctls.Record // every record, in arrival order
	hs      []mpctls.Record
	hsDone  bool
	tr      mpctls.Transcript
	ends    int
	cut     bool
	changed chan struct{}
	srvConn net.Conn
	// inject, when set, is written to the client after each server
	// record the relay forwards, as an attacker on the path to the
	// server could; it is recorded like the server's own records.
	inject      func(after mpctls.Record) []byte
	injectedSeq uint64
}

func startRelay(t testing.TB, server string) *testRelay {
	t.Helper()
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	r := &testRelay{key: key, pub: pub, changed: make(chan struct{})}
	rand.Read(r.sid[:])
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	r.addr = l.Addr().String()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", server)
		if err != nil {
			c.Close()
			return
		}
		r.mu.Lock()
		r.srvConn = s
		r.mu.Unlock()
		done := make(chan struct{}, 2)
		go func() { r.pump(c, s, mpctls.ClientToServer); done <- struct{}{} }()
		go func() { r.pump(s, c, mpctls.ServerToClient); done <- struct{}{} }()
		<-done
		<-done
		c.Close()
		s.Close()
	}()
	return r
}

func (r *testRelay) signal() {
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *testRelay) add(rec mpctls.Record) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec.Dir == mpctls.ServerToClient && r.cut {
		return false
	}
	if err := r.tr.Add(rec); err != nil {
		return false
	}
	r.recs = append(r.recs, rec)
	if !r.hsDone {
		r.hs = append(r.hs, rec)
		if rec.Dir == mpctls.ClientToServer && rec.Type == mpctls.RecordApplicationData {
			r.hsDone = true
		}
	}
	r.signal()
	return true
}

func (r *testRelay) pump(src, dst net.Conn, dir mpctls.Direction) {
	defer func() {
		r.mu.Lock()
		r.ends++
		r.signal()
		r.mu.Unlock()
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
	}()
	rr := mpctls.NewRecordReader(src, dir)
	var injected uint64
	for {
		rec, err := rr.Next()
		if err != nil {
			return
		}
		rec.Seq += injected
		if !r.add(rec) {
			return
		}
		if _, err := dst.Write(rec.Raw); err != nil && !errors.Is(err, io.ErrClosedPipe) {
			return
		}
		if dir == mpctls.ServerToClient && r.inject != nil {
			if raw := r.inject(rec); raw != nil {
				injected++
				fake := mpctls.Record{Dir: dir, Seq: rec.Seq + 1, Type: raw[0], Version: uint16(raw[1])<<8 | uint16(raw[2]), Raw: raw}
				r.mu.Lock()
				r.injectedSeq = fake.Seq
				r.mu.Unlock()
				if r.add(fake) {
					dst.Write(raw)
				}
			}
		}
	}
}

func (r *testRelay) Snapshot() ([]mpctls.Record, uint64, bool, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]mpctls.Record(nil), r.hs...), r.tr.Records(mpctls.ServerToClient), r.ends == 2, r.changed
}

func (r *testRelay) Commit(epoch uint32, cut bool) ([]byte, uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cut && !r.cut {
		r.cut = true
		if r.srvConn != nil {
			r.srvConn.(*net.TCPConn).CloseRead()
		}
	}
	cp := &mpctls.Checkpoint{SessionID: r.sid, Epoch: epoch, ClientRecords: r.tr.Records(mpctls.ClientToServer),
		ServerRecords: r.tr.Records(mpctls.ServerToClient), Root: r.tr.Root()}
	b, err := cp.Sign(r.key)
	return b, cp.ServerRecords, err
}

func (r *testRelay) Target() (string, time.Time) { return testHost, time.Now() }

// all returns every record, in arrival order.
func (r *testRelay) all() []mpctls.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]mpctls.Record(nil), r.recs...)
}

// clientRecords returns the client's records so far.
func (r *testRelay) clientRecords() []mpctls.Record {
	var out []mpctls.Record
	for _, rec := range r.all() {
		if rec.Dir == mpctls.ClientToServer {
			out = append(out, rec)
		}
	}
	return out
}

// sign signs the MPC-mode statement of everything recorded, as package
// notary would, and returns it with the key to verify it under.
func (r *testRelay) sign(t testing.TB, o *Outcome) ([]byte, []ed25519.PublicKey) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	st := &mpctls.Statement{SessionID: r.sid, Start: now, End: now, SNI: testHost, Address: "127.0.0.1:1",
		Version: o.Handshake.Version, CipherSuite: o.Handshake.CipherSuite, CertChainDigest: o.Handshake.CertChainDigest,
		Root: r.tr.Root(), ClientRecords: r.tr.Records(mpctls.ClientToServer), ClientBytes: r.tr.Bytes(mpctls.ClientToServer),
		ServerRecords: r.tr.Records(mpctls.ServerToClient), ServerBytes: r.tr.Bytes(mpctls.ServerToClient),
		Mode: mpctls.ModeMPC, Reveals: o.Reveals}
	b, err := st.Sign(r.key)
	if err != nil {
		t.Fatal(err)
	}
	return b, []ed25519.PublicKey{r.pub}
}
