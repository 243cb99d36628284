package mpc

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// The wire: frames of a 10-byte header — stream (1 byte), type (1),
// sequence number (4, per stream and direction, from 0), payload length
// (4), all big-endian — and the payload. Two logical streams share the
// connection: control (small messages, always sent first) and bulk
// (garbled tables, in chunks of at most bulkChunk bytes), so that a large
// transfer never delays a control message by more than one chunk.
const (
	headerSize = 10
	bulkChunk  = 64 << 10
	// maxControlFrame bounds one control message: the largest are the
	// labels of an input of up to MaxInputBits bits (16 bytes each) and an
	// OT extension matrix (16 bytes per OT).
	maxControlFrame = 16<<20 + 4096
)

type stream uint8

const (
	control stream = iota
	bulk
	numStreams
)

// Frame types. Each message of the protocol has its own type, so a peer
// that is not at the same step is detected at the first frame.
type ftype uint8

const (
	tHello ftype = iota + 1
	tBaseOT
	tExtMatrix
	tExtChallenge
	tExtResponse
	tInputLabels // P → N: active GA labels and GB choice flips of P's input
	tInputGBCorr // N → P: GB label corrections of P's input
	tInputFlips  // N → P: GA choice flips of N's input
	tInputGACorr // P → N: GA label corrections of N's input
	tCall        // both: the digest of the circuit called
	tTables      // bulk: garbled tables of one call, in chunks
	tDecodeBits  // P → N: decoding bits
	tDecoded     // N → P: decoded bits and the hash of their labels
	tKeyCommit   // P → N
	tKeyShare    // N → P
	tKeyOpen     // P → N
	tECtF        // the conversion's four messages
	tFinalReveal // N → P: N's inputs, label hashes, GB labels, scalar
	tFinalCommit // P → N: commitment to the proof's output labels
	tFinalOpen   // N → P: Δ_B and the GB seed
	tFinalProof  // P → N: opening of the commitment
	tFinalAccept // N → P
	tMaskLabels  // P → N: active GA labels of a random input of P's
	tAbort       // either: the sender ends the session
	numTypes
)

// transport carries frames over a connection: one goroutine reads frames
// into per-stream queues (bounded in bytes), one writes queued frames,
// control first. Every read of the connection has a deadline of idle.
type transport struct {
	conn net.Conn
	idle time.Duration

	mu        sync.Mutex
	cond      *sync.Cond
	out       [numStreams][][]byte // queued frames, header included
	outSeq    [numStreams]uint32
	in        [numStreams][]frame
	inBytes   int
	maxIn     int
	err       error // sticky: the first failure
	closed    bool
	writerEnd chan struct{}
	readerEnd chan struct{}
	sent      [numStreams]int64
	received  [numStreams]int64
}

type frame struct {
	typ     ftype
	payload []byte
}

func newTransport(conn net.Conn, idle time.Duration, maxIn int) *transport {
	t := &transport{conn: conn, idle: idle, maxIn: maxIn, writerEnd: make(chan struct{}), readerEnd: make(chan struct{})}
	t.cond = sync.NewCond(&t.mu)
	go t.writer()
	go t.reader()
	return t
}

// fail records the first error and wakes everyone; it closes the
// connection so that both goroutines end.
func (t *transport) fail(err error) {
	t.mu.Lock()
	if t.err == nil {
		t.err = err
	}
	t.mu.Unlock()
	t.cond.Broadcast()
	t.conn.Close()
}

// send queues a frame; it never blocks on the network.
func (t *transport) send(s stream, typ ftype, payload []byte) error {
	if s == control && len(payload) > maxControlFrame || s == bulk && len(payload) > bulkChunk {
		return fmt.Errorf("%w: a %d-byte frame", ErrLimit, len(payload))
	}
	f := make([]byte, headerSize+len(payload))
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return t.err
	}
	if t.closed {
		return ErrClosed
	}
	f[0], f[1] = byte(s), byte(typ)
	binary.BigEndian.PutUint32(f[2:], t.outSeq[s])
	binary.BigEndian.PutUint32(f[6:], uint32(len(payload)))
	copy(f[headerSize:], payload)
	t.outSeq[s]++
	t.out[s] = append(t.out[s], f)
	t.sent[s] += int64(len(f))
	t.cond.Broadcast()
	return nil
}

// sendBulk queues data as bulk frames of at most bulkChunk bytes.
func (t *transport) sendBulk(typ ftype, data []byte) error {
	for len(data) > 0 {
		n := min(len(data), bulkChunk)
		if err := t.send(bulk, typ, data[:n]); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

func (t *transport) writer() {
	defer close(t.writerEnd)
	w := bufio.NewWriterSize(t.conn, 128<<10)
	for {
		t.mu.Lock()
		for t.err == nil && !t.closed && len(t.out[control]) == 0 && len(t.out[bulk]) == 0 {
			t.cond.Wait()
		}
		if t.err != nil {
			t.mu.Unlock()
			return
		}
		var f []byte
		if len(t.out[control]) > 0 {
			f, t.out[control] = t.out[control][0], t.out[control][1:]
		} else if len(t.out[bulk]) > 0 {
			f, t.out[bulk] = t.out[bulk][0], t.out[bulk][1:]
		} else { // closed and drained
			t.mu.Unlock()
			return
		}
		more := len(t.out[control])+len(t.out[bulk]) > 0
		t.mu.Unlock()
		t.conn.SetWriteDeadline(time.Now().Add(t.idle))
		if _, err := w.Write(f); err != nil {
			t.fail(ioError(err))
			return
		}
		if !more {
			if err := w.Flush(); err != nil {
				t.fail(ioError(err))
				return
			}
		}
	}
}

func (t *transport) reader() {
	defer close(t.readerEnd)
	r := bufio.NewReaderSize(t.conn, 128<<10)
	var expect [numStreams]uint32
	hdr := make([]byte, headerSize)
	for {
		t.conn.SetReadDeadline(time.Now().Add(t.idle))
		if _, err := io.ReadFull(r, hdr); err != nil {
			t.fail(ioError(err))
			return
		}
		s, typ := stream(hdr[0]), ftype(hdr[1])
		seq, n := binary.BigEndian.Uint32(hdr[2:]), binary.BigEndian.Uint32(hdr[6:])
		if s == control && typ == tAbort && n <= 200 {
			// An abort replaces whatever the peer had queued, so its
			// sequence number is not checked.
			reason := make([]byte, n)
			io.ReadFull(r, reason)
			t.fail(fmt.Errorf("%w: %s", ErrPeerAborted, abortReason(reason)))
			return
		}
		switch {
		case s >= numStreams || typ == 0 || typ >= numTypes:
			t.fail(fmt.Errorf("%w: frame of stream %d, type %d", ErrProtocol, s, typ))
			return
		case seq != expect[s]:
			t.fail(fmt.Errorf("%w: frame %d of stream %d where %d was due (replayed, reordered or dropped)", ErrProtocol, seq, s, expect[s]))
			return
		case s == control && n > maxControlFrame || s == bulk && n > bulkChunk:
			t.fail(fmt.Errorf("%w: a %d-byte frame", ErrProtocol, n))
			return
		}
		expect[s]++
		t.mu.Lock()
		over := t.inBytes+int(n) > t.maxIn
		t.mu.Unlock()
		if over {
			t.fail(fmt.Errorf("%w: the peer sent more than %d bytes ahead of the protocol", ErrLimit, t.maxIn))
			return
		}
		payload := make([]byte, n)
		t.conn.SetReadDeadline(time.Now().Add(t.idle))
		if _, err := io.ReadFull(r, payload); err != nil {
			t.fail(ioError(err))
			return
		}
		t.mu.Lock()
		t.in[s] = append(t.in[s], frame{typ, payload})
		t.inBytes += int(n)
		t.received[s] += int64(headerSize) + int64(n)
		t.mu.Unlock()
		t.cond.Broadcast()
	}
}

// recv returns the payload of the next frame of stream s, which must be
// of type typ. It waits for it until ctx ends or the session fails.
func (t *transport) recv(ctx context.Context, s stream, typ ftype) ([]byte, error) {
	stop := context.AfterFunc(ctx, func() {
		t.mu.Lock()
		t.mu.Unlock()
		t.cond.Broadcast()
	})
	defer stop()
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.in[s]) == 0 {
		if t.err != nil {
			return nil, t.err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t.cond.Wait()
	}
	f := t.in[s][0]
	t.in[s][0] = frame{}
	t.in[s] = t.in[s][1:]
	t.inBytes -= len(f.payload)
	if f.typ != typ {
		return nil, fmt.Errorf("%w: message type %d where %d was due (the parties are not at the same step)", ErrProtocol, f.typ, typ)
	}
	return f.payload, nil
}

// recvBulk reads n bytes of bulk frames of type typ.
func (t *transport) recvBulk(ctx context.Context, typ ftype, n int) ([]byte, error) {
	out := make([]byte, 0, n)
	for len(out) < n {
		p, err := t.recv(ctx, bulk, typ)
		if err != nil {
			return nil, err
		}
		if len(out)+len(p) > n || len(p) == 0 {
			return nil, fmt.Errorf("%w: %d bytes of tables where %d were due", ErrProtocol, len(out)+len(p), n)
		}
		out = append(out, p...)
	}
	return out, nil
}

// abort sends the peer an abort frame (best effort, within a second) in
// place of everything still queued, and ends the transport. Frames
// already handed to the connection stay whole: the writer finishes the
// frame it is writing before the abort frame.
func (t *transport) abort(reason string) {
	msg := []byte(reason)
	if len(msg) > 200 {
		msg = msg[:200]
	}
	f := make([]byte, headerSize+len(msg))
	f[0], f[1] = byte(control), byte(tAbort)
	binary.BigEndian.PutUint32(f[6:], uint32(len(msg)))
	copy(f[headerSize:], msg)
	t.mu.Lock()
	live := t.err == nil && !t.closed
	if live {
		t.out[control] = [][]byte{f}
		t.out[bulk] = nil
		t.closed = true
	}
	t.mu.Unlock()
	t.cond.Broadcast()
	if live {
		select {
		case <-t.writerEnd:
		case <-time.After(time.Second):
		}
	}
	t.fail(ErrClosed)
}

// close flushes what is queued (within the idle timeout) and ends the
// transport.
func (t *transport) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.cond.Broadcast()
	select {
	case <-t.writerEnd:
	case <-time.After(t.idle):
	}
	t.fail(ErrClosed)
	<-t.readerEnd
}

func abortReason(p []byte) string {
	for _, c := range p {
		if c < 0x20 || c > 0x7e {
			return "(unprintable reason)"
		}
	}
	return string(p)
}

// ioError classifies a failure of the connection.
func ioError(err error) error {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: the connection ended mid-session: %v", ErrTruncated, err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: no message from the peer: %v", ErrTimeout, err)
	case errors.Is(err, net.ErrClosed):
		return ErrClosed
	}
	return fmt.Errorf("%w: %v", ErrTruncated, err)
}
