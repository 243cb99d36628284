package server_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/disktest"
	"github.com/acds-project/acds/server"
)

// TestDeleteOnFullDisk: when the data disk is full, new requests get 503
// with Retry-After, but a user can still delete a request (204), which
// used to fail with 503 too (issue 15).
func TestDeleteOnFullDisk(t *testing.T) {
	dir := disktest.Small(t, 4<<20)
	st := openSQLite(t, filepath.Join(dir, "acds.db"))
	defer st.Close()
	h := newHarness(t, func(c *server.Config) { c.Store, c.Workers = st, -1 })
	tok := h.anon().Token
	noise := make([]byte, 16<<10)
	var accepted []string
	for i := 0; ; i++ {
		if i == 2000 {
			t.Fatal("the disk never filled")
		}
		_, _ = rand.Read(noise)
		bundle := `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","id":"p` + hex.EncodeToString(noise[:4]) +
			`","name":[{"text":"` + hex.EncodeToString(noise) + `"}]}}]}`
		resp, b := h.do("POST", "/v1/process", tok, map[string]any{"data": json.RawMessage(bundle), "outputFormat": acds.OutputFHIRR4})
		if resp.StatusCode == http.StatusServiceUnavailable {
			wantProblem(t, resp, b, acds.ProblemUnavailable)
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("503 without Retry-After")
			}
			break
		}
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("POST: %d %s", resp.StatusCode, b)
		}
		accepted = append(accepted, decode[acds.Request](t, b).RequestID)
	}
	t.Logf("disk full after %d requests", len(accepted))
	for _, id := range accepted[:3] {
		if resp, b := h.do("DELETE", "/v1/requests/"+id, tok, nil); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE on a full disk: %d %s", resp.StatusCode, b)
		}
		if resp, b := h.do("GET", "/v1/requests/"+id, tok, nil); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("GET after DELETE: %d %s", resp.StatusCode, b)
		}
	}
}
