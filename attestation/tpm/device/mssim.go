package device

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// The TPM reference simulator's TCP command protocol (what swtpm's
// --server port also speaks): a command is TPM_SEND_COMMAND (8), a
// locality byte, the command's length and the command; the answer is the
// response's length, the response and a 32-bit zero.
const (
	mssimSendCommand = 8
	maxResponse      = 64 << 10 // a TPM 2.0 response is at most a few KiB
)

// mssimConn is an io.ReadWriteCloser of TPM commands over that protocol:
// each Write sends one command; Reads return its response.
type mssimConn struct {
	mu      sync.Mutex
	c       net.Conn
	timeout time.Duration
	pending []byte
	broken  error // after a failed exchange the stream is out of step
}

func dialMSSim(addr string, timeout time.Duration) (*mssimConn, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("want mssim://HOST:PORT: %w", err)
	}
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	return &mssimConn{c: c, timeout: timeout}, nil
}

func (m *mssimConn) Write(cmd []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.broken != nil {
		return 0, m.broken
	}
	n, err := m.exchange(cmd)
	if err != nil {
		m.broken = fmt.Errorf("mssim connection unusable after: %w", err)
		m.c.Close()
	}
	return n, err
}

func (m *mssimConn) exchange(cmd []byte) (int, error) {
	msg := make([]byte, 9, 9+len(cmd))
	binary.BigEndian.PutUint32(msg, mssimSendCommand)
	msg[4] = 0 // locality
	binary.BigEndian.PutUint32(msg[5:], uint32(len(cmd)))
	msg = append(msg, cmd...)
	if err := m.c.SetDeadline(time.Now().Add(m.timeout)); err != nil {
		return 0, err
	}
	if _, err := m.c.Write(msg); err != nil {
		return 0, err
	}
	var n uint32
	if err := binary.Read(m.c, binary.BigEndian, &n); err != nil {
		return 0, fmt.Errorf("mssim response: %w", err)
	}
	if n > maxResponse {
		return 0, fmt.Errorf("mssim response of %d bytes exceeds %d", n, maxResponse)
	}
	resp := make([]byte, n+4)
	if _, err := io.ReadFull(m.c, resp); err != nil {
		return 0, fmt.Errorf("mssim response: %w", err)
	}
	if binary.BigEndian.Uint32(resp[n:]) != 0 {
		return 0, fmt.Errorf("mssim response not acknowledged")
	}
	m.pending = resp[:n]
	return len(cmd), nil
}

func (m *mssimConn) Read(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.pending) == 0 {
		return 0, io.EOF
	}
	n := copy(p, m.pending)
	m.pending = m.pending[n:]
	return n, nil
}

func (m *mssimConn) Close() error { return m.c.Close() }
