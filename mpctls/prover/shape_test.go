package prover

import (
	"io"
	"net"
	"testing"
	"time"
)

// startLink runs a TCP relay on loopback in front of target that models a
// network link for what the target sends: a fixed delay (the whole round
// trip, put on one direction) and a bandwidth cap. Pointing clients at it
// models a portal across a network, while the notary and prover stay on
// one host as with `acds serve`'s in-process notary.
func startLink(t testing.TB, target string, delay time.Duration, bytesPerSec float64) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go relayLink(c, target, delay, bytesPerSec)
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

type chunk struct {
	b   []byte
	due time.Time
}

func relayLink(client net.Conn, target string, delay time.Duration, rate float64) {
	defer client.Close()
	server, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer server.Close()
	go func() {
		io.Copy(server, client)
		server.(*net.TCPConn).CloseWrite()
	}()
	q := make(chan chunk, 1024)
	go func() {
		defer close(q)
		for {
			buf := make([]byte, 32<<10)
			n, err := server.Read(buf)
			if n > 0 {
				q <- chunk{buf[:n], time.Now().Add(delay)}
			}
			if err != nil {
				return
			}
		}
	}()
	var next time.Time // when the link is free again
	for ch := range q {
		start := ch.due
		if next.After(start) {
			start = next
		}
		if d := time.Until(start); d > 0 {
			time.Sleep(d)
		}
		next = start.Add(time.Duration(float64(len(ch.b)) / rate * float64(time.Second)))
		if _, err := client.Write(ch.b); err != nil {
			return
		}
	}
	client.(*net.TCPConn).CloseWrite()
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.Copy(io.Discard, client)
}
