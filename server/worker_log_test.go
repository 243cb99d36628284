package server_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
)

// failingEnd is a MemStore whose first Complete fails.
type failingEnd struct {
	*servertest.MemStore
	calls atomic.Int32
}

func (f *failingEnd) Complete(ctx context.Context, id, worker string, result []byte, now time.Time) error {
	if f.calls.Add(1) == 1 {
		return errors.New("disk full")
	}
	return f.MemStore.Complete(ctx, id, worker, result, now)
}

// TestCompletionLoggedOnlyWhenStored (issue 15): when the write that ends
// a request fails, the worker logs the failure and never "request
// completed", which it used to log before the write.
func TestCompletionLoggedOnlyWhenStored(t *testing.T) {
	st := &failingEnd{MemStore: servertest.NewMemStore()}
	h := newHarness(t, func(c *server.Config) { c.Store = st })
	sess := h.anon()
	resp, b := h.do("POST", "/v1/process", sess.Token, processBody("fhir_r4"))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("process: %d %s", resp.StatusCode, b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(h.logs.String(), "ending the request failed") {
		if time.Now().After(deadline) {
			t.Fatalf("no log of the failed write:\n%s", h.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if strings.Contains(h.logs.String(), "request completed") {
		t.Fatalf("the worker logged completion of a request whose write failed:\n%s", h.logs)
	}
}
