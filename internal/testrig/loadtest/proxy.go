package loadtest

import (
	"net"
	"sync"
	"time"
)

// Proxy is a TCP proxy on loopback between a service and its database,
// for faults: Pause black-holes the link (connections stay open, nothing
// passes, new ones hang), Drop closes every connection, Resume lets
// traffic pass again.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	paused bool
	wake   chan struct{} // closed on Resume
	conns  map[net.Conn]struct{}
	closed bool
}

// NewProxy listens on 127.0.0.1 and forwards to target (host:port).
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, wake: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	go p.serve()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

// gate blocks while the proxy is paused; false when it is closed.
func (p *Proxy) gate() bool {
	for {
		p.mu.Lock()
		paused, wake, closed := p.paused, p.wake, p.closed
		p.mu.Unlock()
		if closed {
			return false
		}
		if !paused {
			return true
		}
		<-wake
	}
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) handle(c net.Conn) {
	if !p.track(c) {
		_ = c.Close()
		return
	}
	defer p.untrack(c)
	if !p.gate() {
		return
	}
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	if !p.track(up) {
		_ = up.Close()
		return
	}
	defer p.untrack(up)
	done := make(chan struct{}, 2)
	go func() { p.pipe(up, c); done <- struct{}{} }()
	go func() { p.pipe(c, up); done <- struct{}{} }()
	<-done
}

// pipe copies src to dst, a chunk at a time, holding each chunk while the
// proxy is paused.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed connection
		}
	}
}

// Pause black-holes the link until Resume.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		p.paused, p.wake = true, make(chan struct{})
	}
}

// Resume lets traffic pass again.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		p.paused = false
		close(p.wake)
	}
}

// Drop closes every open connection (the service must reconnect).
func (p *Proxy) Drop() {
	p.mu.Lock()
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	if p.paused {
		p.paused = false
		close(p.wake)
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.Drop()
}
