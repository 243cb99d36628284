package mpc

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acds-project/acds/internal/testrig/netem"
	"github.com/acds-project/acds/mpctls/mpc/circuit"
	"github.com/acds-project/acds/mpctls/mpc/garble"
)

// The engine's benchmarks run both parties in one process over a real
// TCP loopback connection, optionally through an emulated link (the
// issue's 100 Mbit/s, 25 ms RTT; the prover's end is the link's client,
// so "up" is the prover's upload). Each reports wall time per operation
// and the bytes each way; the baseline in the same run is
// BenchmarkFloor*, the raw transfer of the garbled tables' bytes over the
// same link, which no design that sends those bytes can beat.
//
//	go test -run '^$' -bench . -benchtime 3x ./mpctls/mpc/

// tcpPair returns the two ends of a loopback TCP connection; the prover's
// crosses link if it is not nil.
func tcpPair(b *testing.B, link *netem.Link) (net.Conn, net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(ch)
			return
		}
		ch <- c
	}()
	p, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	n, ok := <-ch
	if !ok {
		b.Fatal("accept failed")
	}
	if link != nil {
		p = link.Wrap(p)
	}
	return p, n
}

func wan() *netem.Link {
	return netem.New(netem.Symmetric(25*time.Millisecond, 100e6), netem.Symmetric(25*time.Millisecond, 100e6))
}

// both runs the two programs, each in a new session with Finalize, and
// returns the prover's session stats.
func both(b *testing.B, link *netem.Link, fp, fn party) Stats {
	p, n := tcpPair(b, link)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var st Stats
	var wg sync.WaitGroup
	var errN error
	wg.Add(1)
	go func() {
		defer wg.Done()
		s, err := NewSession(ctx, n, Notary, Config{})
		if err != nil {
			errN = err
			return
		}
		defer s.Close()
		if errN = fn(ctx, s); errN == nil {
			errN = s.Finalize(ctx)
		}
	}()
	s, err := NewSession(ctx, p, Prover, Config{})
	if err != nil {
		b.Fatal(err)
	}
	if err = fp(ctx, s); err == nil {
		err = s.Finalize(ctx)
	}
	st = s.Stats()
	s.Close()
	wg.Wait()
	if err != nil || errN != nil {
		b.Fatalf("prover: %v; notary: %v", err, errN)
	}
	return st
}

// cpuTime returns the CPU time this process has used (both parties run in
// it): a figure a loaded machine does not inflate, unlike wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loop runs f b.N times and reports the CPU seconds per operation.
func loop(b *testing.B, f func()) {
	start := cpuTime()
	for b.Loop() {
		f()
	}
	b.ReportMetric((cpuTime()-start).Seconds()/float64(b.N), "cpu-s/op")
}

func report(b *testing.B, st Stats) {
	b.ReportMetric(float64(st.ControlSent+st.BulkSent)/1e6, "MB-up")
	b.ReportMetric(float64(st.ControlReceived+st.BulkReceived)/1e6, "MB-down")
	if st.ANDs > 0 {
		b.ReportMetric(float64(st.ControlSent+st.BulkSent)/float64(st.ANDs), "B-up/AND")
	}
}

// BenchmarkSetup: a session with nothing in it (hello, both directions'
// base OTs and first extension of 8,192 OTs, Finalize).
func BenchmarkSetup(b *testing.B) {
	for _, l := range []struct {
		name string
		link func() *netem.Link
	}{{"loopback", func() *netem.Link { return nil }}, {"wan", wan}} {
		b.Run(l.name, func(b *testing.B) {
			var st Stats
			nop := func(ctx context.Context, s *Session) error { return nil }
			loop(b, func() { st = both(b, l.link(), nop, nop) })
			report(b, st)
		})
	}
}

// BenchmarkECDH: KeyShare, ECDH (the conversion and the modular addition
// in 2PC) and Finalize, setup included.
func BenchmarkECDH(b *testing.B) {
	server, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	prog := func(ctx context.Context, s *Session) error {
		if _, err := s.KeyShare(ctx); err != nil {
			return err
		}
		v, err := s.ECDH(ctx, server.PublicKey().Bytes())
		if err != nil {
			return err
		}
		_, err = s.Share(ctx, v)
		return err
	}
	for _, l := range []struct {
		name string
		link func() *netem.Link
	}{{"loopback", func() *netem.Link { return nil }}, {"wan", wan}} {
		b.Run(l.name, func(b *testing.B) {
			var st Stats
			loop(b, func() { st = both(b, l.link(), prog, prog) })
			report(b, st)
		})
	}
}

// schedule models the reduced TLS 1.3 key schedule's shape: levels of
// SHA-256 compressions chained through states kept in the session, each
// level's blocks an input of the notary's (the transcript-dependent inner
// hashes), one 256-bit opening per level. Every call is made first, so
// the prover garbles and streams everything at once, then the levels
// are assigned and opened in turn.
func schedule(c *circuit.Circuit, levels, perLevel int) party {
	return func(ctx context.Context, s *Session) error {
		var mine []byte
		if s.role == Prover {
			mine = make([]byte, 32)
		}
		state, err := s.InputValue(ctx, Prover, 256, mine)
		if err != nil {
			return err
		}
		blocks := make([][]Value, levels)
		outs := make([][]Value, levels)
		for l := 0; l < levels; l++ {
			for k := 0; k < perLevel; k++ {
				blk, err := s.Input(Notary, 512)
				if err != nil {
					return err
				}
				res, err := s.Call(ctx, c, state, blk)
				if err != nil {
					return err
				}
				state = res[0]
				blocks[l] = append(blocks[l], blk)
				outs[l] = append(outs[l], res[0])
			}
		}
		for l := 0; l < levels; l++ {
			for _, blk := range blocks[l] {
				var v []byte
				if s.role == Notary {
					v = make([]byte, 64)
				}
				if err := s.Assign(ctx, blk, v); err != nil {
					return err
				}
			}
			if _, err := s.Open(ctx, outs[l][len(outs[l])-1], ToBoth); err != nil {
				return err
			}
		}
		return nil
	}
}

// BenchmarkCompression: one malicious-secure SHA-256 compression (22,573
// AND) with its opening and Finalize, setup included.
func BenchmarkCompression(b *testing.B) {
	c := compressCircuit(b)
	for _, l := range []struct {
		name string
		link func() *netem.Link
	}{{"loopback", func() *netem.Link { return nil }}, {"wan", wan}} {
		b.Run(l.name, func(b *testing.B) {
			var st Stats
			loop(b, func() { st = both(b, l.link(), schedule(c, 1, 1), schedule(c, 1, 1)) })
			report(b, st)
		})
	}
}

// BenchmarkSchedule: 22 compressions (≈ 497k AND) in 11 levels of two,
// the reduced TLS 1.3 key schedule's size, setup and Finalize included.
func BenchmarkSchedule(b *testing.B) {
	c := compressCircuit(b)
	for _, l := range []struct {
		name string
		link func() *netem.Link
	}{{"loopback", func() *netem.Link { return nil }}, {"wan", wan}} {
		b.Run(l.name, func(b *testing.B) {
			var st Stats
			loop(b, func() { st = both(b, l.link(), schedule(c, 11, 2), schedule(c, 11, 2)) })
			report(b, st)
		})
	}
}

// BenchmarkFloorSchedule is the baseline of BenchmarkSchedule/wan: the
// prover's garbled tables for 22 compressions (three-halves, 24.6 bytes
// per AND) sent raw over the same link, plus one round trip. No protocol
// that sends the tables can finish sooner.
func BenchmarkFloorSchedule(b *testing.B) {
	c := compressCircuit(b)
	n := 22 * garble.ThreeHalvesSize(c.ANDs())
	for b.Loop() {
		link := wan()
		p, q := tcpPair(b, link)
		done := make(chan struct{})
		go func() {
			io.Copy(io.Discard, q)
			q.Write([]byte{1})
			close(done)
		}()
		buf := make([]byte, 1<<20)
		for sent := 0; sent < n; sent += len(buf) {
			if _, err := p.Write(buf[:min(len(buf), n-sent)]); err != nil {
				b.Fatal(err)
			}
		}
		p.(interface{ CloseWrite() error }).CloseWrite()
		p.Read(buf[:1])
		<-done
		p.Close()
		q.Close()
	}
	b.ReportMetric(float64(n)/1e6, "MB-up")
}
