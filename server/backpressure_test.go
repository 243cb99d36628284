package server_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/stores/sqlstore"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
	"github.com/acds-project/acds/store"
)

// lookupCounter is a MemStore that counts token lookups.
type lookupCounter struct {
	*servertest.MemStore
	lookups atomic.Int32
}

func (l *lookupCounter) SessionByTokenHash(ctx context.Context, h []byte) (store.Session, error) {
	l.lookups.Add(1)
	return l.MemStore.SessionByTokenHash(ctx, h)
}

func guessToken(t *testing.T) string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "acds_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// TestFailedTokensLimitedPerAddress (issue 15): an address that presents
// FailedTokenBurst unknown tokens is then answered 429 with Retry-After,
// without a store lookup; a token the server already knows still works
// from that address.
func TestFailedTokensLimitedPerAddress(t *testing.T) {
	st := &lookupCounter{MemStore: servertest.NewMemStore()}
	h := newHarness(t, func(c *server.Config) { c.Store = st })
	sess := h.anon()
	if resp, b := h.do("GET", "/v1/requests", sess.Token, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("list: %d %s", resp.StatusCode, b)
	}
	before := st.lookups.Load()
	for i := 0; i < server.FailedTokenBurst; i++ {
		resp, b := h.do("GET", "/v1/requests", guessToken(t), nil)
		wantProblem(t, resp, b, acds.ProblemUnauthorized)
	}
	if got := st.lookups.Load() - before; got != server.FailedTokenBurst {
		t.Fatalf("%d lookups for %d guesses", got, server.FailedTokenBurst)
	}
	resp, b := h.do("GET", "/v1/requests", guessToken(t), nil)
	wantProblem(t, resp, b, acds.ProblemRateLimited)
	if resp.Header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	if got := st.lookups.Load() - before; got != server.FailedTokenBurst {
		t.Fatalf("the refused guess reached the store (%d lookups)", got)
	}
	if resp, b := h.do("GET", "/v1/requests", sess.Token, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("a known token from a limited address: %d %s", resp.StatusCode, b)
	}
}

// TestQueueBound (issue 15, DESIGN §11): past MaxQueue requests still
// processing, POST answers 503 unavailable with Retry-After; the bound is
// counted in the store, so a server that starts on a full store (another
// replica, or a restart) refuses too.
func TestQueueBound(t *testing.T) {
	st := servertest.NewMemStore()
	mod := func(c *server.Config) { c.Store, c.MaxQueue, c.Workers = st, 3, -1 }
	h := newHarness(t, mod)
	sess := h.anon()
	for i := 0; i < 3; i++ {
		if resp, b := h.do("POST", "/v1/process", sess.Token, processBody(acds.OutputFHIRR4)); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, b)
		}
	}
	for _, srv := range []*harness{h, newHarness(t, mod)} {
		resp, b := srv.do("POST", "/v1/process", sess.Token, processBody(acds.OutputFHIRR4))
		wantProblem(t, resp, b, acds.ProblemUnavailable)
		if resp.Header.Get("Retry-After") == "" {
			t.Fatal("503 without Retry-After")
		}
	}
	qs, err := st.QueueStats(context.Background())
	if err != nil || qs.Processing != 3 {
		t.Fatalf("processing = %d, %v; want the 3 accepted", qs.Processing, err)
	}
}

// The stores the service opens can count their queue.
var (
	_ store.QueueStatter = (*sqlstore.SQLite)(nil)
	_ store.QueueStatter = (*sqlstore.Postgres)(nil)
	_ store.QueueStatter = (*servertest.MemStore)(nil)
)
