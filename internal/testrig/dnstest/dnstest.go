// Package dnstest is a DNS server on loopback for tests: it answers each
// name as the test says (NXDOMAIN, SERVFAIL, silence, a loopback
// address), and Resolver returns a net.Resolver whose every query goes to
// it, whatever /etc/resolv.conf names. A test that resolves portal names
// through it resolves no public name and sees the errors a real resolver
// gives ("lookup h on <the configured nameserver>: no such host").
// RefusedPort gives the port such a name's unreachable portal stands on:
// one that refuses every connection while the test runs.
package dnstest

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Mode is how the server answers a name.
type Mode int

// Answers.
const (
	NXDomain Mode = iota // RCODE 3: the name does not exist (the default)
	ServFail             // RCODE 2: the resolver failed
	Silent               // no answer at all: the lookup times out
	Loopback             // A 127.0.0.1, no AAAA
)

// Server is a DNS server on loopback UDP.
type Server struct {
	pc    net.PacketConn
	names map[string]Mode

	mu    sync.Mutex
	asked []string
}

// Start starts a server answering names (fully qualified, lower case, with
// the final dot, e.g. "portal.example.org."); every other name is
// NXDOMAIN. It stops when the test ends.
func Start(t testing.TB, names map[string]Mode) *Server {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{pc: pc, names: names}
	t.Cleanup(func() { pc.Close() })
	go s.serve()
	return s
}

// Addr is the server's address.
func (s *Server) Addr() string { return s.pc.LocalAddr().String() }

// Asked returns the names queried so far.
func (s *Server) Asked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.asked...)
}

// Resolver returns a pure Go net.Resolver whose queries all go to s; a
// silent name times out after 200 ms instead of the configured seconds.
func (s *Server) Resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "udp", s.Addr())
		if err != nil {
			return nil, err
		}
		return shortDeadline{c.(*net.UDPConn)}, nil
	}}
}

// shortDeadline is a UDP connection (still a net.PacketConn, so the
// resolver speaks UDP over it, not TCP framing) whose deadlines are at
// most 200 ms away.
type shortDeadline struct{ *net.UDPConn }

func (c shortDeadline) SetDeadline(t time.Time) error {
	if limit := time.Now().Add(200 * time.Millisecond); t.IsZero() || t.After(limit) {
		t = limit
	}
	return c.UDPConn.SetDeadline(t)
}

func (s *Server) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := s.pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if resp := s.answer(buf[:n]); resp != nil {
			_, _ = s.pc.WriteTo(resp, from)
		}
	}
}

// answer builds the response to one query, or nil to stay silent.
func (s *Server) answer(q []byte) []byte {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil
	}
	// The question: labels, then type and class.
	i := 12
	var labels []string
	for i < len(q) && q[i] != 0 {
		l := int(q[i])
		if l&0xc0 != 0 || i+1+l > len(q) {
			return nil
		}
		labels = append(labels, string(q[i+1:i+1+l]))
		i += 1 + l
	}
	if i+5 > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i+1 : i+3])
	question := q[12 : i+5]
	name := strings.ToLower(strings.Join(labels, ".")) + "."
	s.mu.Lock()
	s.asked = append(s.asked, name)
	s.mu.Unlock()

	flags := uint16(0x8000 | 0x0400 | 0x0080) // response, authoritative, recursion available
	flags |= binary.BigEndian.Uint16(q[2:4]) & 0x0100
	var answer []byte
	switch s.names[name] {
	case Silent:
		return nil
	case NXDomain:
		flags |= 3
	case ServFail:
		flags |= 2
	case Loopback:
		if qtype == 1 { // A: a pointer to the question's name, A, IN, TTL 60, 127.0.0.1
			answer = []byte{0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1}
		}
	}
	resp := make([]byte, 12, 12+len(question)+len(answer))
	copy(resp[0:2], q[0:2])
	binary.BigEndian.PutUint16(resp[2:4], flags)
	binary.BigEndian.PutUint16(resp[4:6], 1)
	if len(answer) > 0 {
		binary.BigEndian.PutUint16(resp[6:8], 1)
	}
	resp = append(resp, question...)
	return append(resp, answer...)
}

// Leaks returns what s gives away of the service's network: the
// nameservers of /etc/resolv.conf, the fake server's address, the
// resolver's "lookup … on …" phrasing, any IP address (with or without
// port), and any of extra (e.g. the notary's address). Nil means s is
// clean.
func (s *Server) Leaks(text string, extra ...string) []string {
	var out []string
	needles := append(nameservers(), s.Addr(), "lookup ", " on ")
	for _, n := range append(needles, extra...) {
		if n != "" && strings.Contains(text, n) {
			out = append(out, n)
		}
	}
	for _, f := range strings.FieldsFunc(text, func(r rune) bool {
		return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F' || r == '.' || r == ':' || r == '[' || r == ']' || r == '%')
	}) {
		f = strings.TrimRight(f, ".:")
		if _, err := netip.ParseAddrPort(f); err == nil {
			out = append(out, f)
		} else if _, err := netip.ParseAddr(strings.Trim(f, "[]")); err == nil {
			out = append(out, f)
		}
	}
	return out
}

// nameservers are the nameservers of /etc/resolv.conf, the service's
// own resolver.
func nameservers() []string {
	b, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "nameserver" {
			out = append(out, f[1])
		}
	}
	return out
}
