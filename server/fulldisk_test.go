package server_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/testrig/disktest"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/store/storetest"
)

// fullDiskBundle is a valid R4 Bundle carrying about 48 KB of noise, so
// that it compresses only to about half.
func fullDiskBundle(t *testing.T) map[string]any {
	noise := make([]byte, 24<<10)
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	bundle := `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","id":"p` +
		hex.EncodeToString(noise[:4]) + `","name":[{"text":"` + hex.EncodeToString(noise) + `"}]}}]}`
	return map[string]any{"data": json.RawMessage(bundle), "outputFormat": acds.OutputFHIRR4}
}

// TestFullDiskDelete: when the SQLite data disk is full, a new request
// gets 503 with Retry-After, but DELETE still answers 204 — several in a
// row (issue 15: it answered 503 too, so the disk could not be cleared
// through the API); after the deletes, once room is back, new requests
// are accepted again. The disk is filled through the store (as fast as
// the test can, also under -race) until it refuses a request; POST is
// then refused too (usually at once).
// filledByOthers: after the server stopped accepting, another program
// takes every byte left on the disk, and gives its room back only after
// the deletes.
func TestFullDiskDelete(t *testing.T) {
	for _, filledByOthers := range []bool{false, true} {
		name := "filled by the server"
		if filledByOthers {
			name = "filled by others"
		}
		t.Run(name, func(t *testing.T) {
			dir := disktest.Small(t, 16<<20)
			st := openSQLite(t, filepath.Join(dir, "acds.db"))
			t.Cleanup(func() { _ = st.Close() }) // after the server's Close (LIFO)
			h := newHarness(t, func(c *server.Config) { c.Store, c.Workers = st, -1 })
			tok := h.anon().Token
			refused := func(resp *http.Response, b []byte) {
				t.Helper()
				wantProblem(t, resp, b, acds.ProblemUnavailable)
				if resp.Header.Get("Retry-After") == "" {
					t.Fatal("503 without Retry-After")
				}
			}
			post := func() (*http.Response, []byte) {
				t.Helper()
				return h.do("POST", "/v1/process", tok, fullDiskBundle(t))
			}
			var accepted []string
			for len(accepted) < 8 {
				resp, b := post()
				if resp.StatusCode != http.StatusAccepted {
					t.Fatalf("POST: %d %s", resp.StatusCode, b)
				}
				accepted = append(accepted, decode[acds.Accepted](t, b).RequestID)
			}
			others := 0
			for ; ; others++ {
				r := storetest.NewRequest("anon-someone-else", storetest.T0)
				r.Input = make([]byte, 16<<10)
				_, _ = rand.Read(r.Input)
				if err := st.CreateRequest(t.Context(), r); err != nil {
					break
				}
			}
			posted := 0
			for ; ; posted++ {
				if posted == 1000 {
					t.Fatal("the disk never filled")
				}
				resp, b := post()
				if resp.StatusCode == http.StatusServiceUnavailable {
					refused(resp, b)
					break
				}
				if resp.StatusCode != http.StatusAccepted {
					t.Fatalf("POST: %d %s", resp.StatusCode, b)
				}
			}
			t.Logf("disk full after %d + %d + %d requests", len(accepted), others, posted)
			if others < 100 {
				t.Fatalf("only %d requests fit", others)
			}
			filler := ""
			if filledByOthers {
				filler = disktest.Fill(t, dir, "other-program.log")
				refused(post())
			}
			// The store refuses new requests but answers: health is not
			// degraded (a balancer that takes a 503 there out of service
			// would cut off the deletions that make room).
			if resp, b := h.do("GET", "/v1/health", "", nil); resp.StatusCode != http.StatusOK {
				t.Fatalf("health on a full disk: %d %s", resp.StatusCode, b)
			}
			for i, id := range accepted[:6] {
				if resp, b := h.do("DELETE", "/v1/requests/"+id, tok, nil); resp.StatusCode != http.StatusNoContent {
					t.Fatalf("DELETE %d on a full disk: %d %s", i+1, resp.StatusCode, b)
				}
				if resp, b := h.do("GET", "/v1/requests/"+id, tok, nil); resp.StatusCode != http.StatusNotFound {
					t.Fatalf("GET after DELETE: %d %s", resp.StatusCode, b)
				}
			}
			if filler != "" {
				if err := os.Remove(filler); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < 2; i++ {
				if resp, b := post(); resp.StatusCode != http.StatusAccepted {
					t.Fatalf("POST %d after the deletes: %d %s", i+1, resp.StatusCode, b)
				}
			}
			// Nothing accepted and not deleted was lost.
			for _, id := range accepted[6:] {
				if resp, b := h.do("GET", "/v1/requests/"+id, tok, nil); resp.StatusCode != http.StatusOK {
					t.Fatalf("GET %s, accepted and not deleted: %d %s", id, resp.StatusCode, b)
				}
			}
		})
	}
}
