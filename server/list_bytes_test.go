package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/server"
)

// TestListEndsAtMaxListBytes: a page of GET /v1/requests holds at most
// Config.MaxListBytes of records (one request at least), short of the
// limit asked for, and its nextCursor lists the rest, each request once —
// so that listing large records cannot hold limit × their size in memory.
func TestListEndsAtMaxListBytes(t *testing.T) {
	// A Patient with a 20 KB name: every accepted body is over 20 KB.
	big := strings.Repeat("x", 20<<10)
	bundle := fmt.Sprintf(`{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","id":"p1","name":[{"family":%q}]}}]}`, big)
	h := newHarness(t, func(c *server.Config) { c.MaxListBytes = 50 << 10; c.Workers = -1 })
	s := h.anon()
	var ids []string
	for range 5 {
		resp, b := h.do("POST", "/v1/process", s.Token, map[string]any{"data": json.RawMessage(bundle), "outputFormat": "fhir_r4"})
		if resp.StatusCode != 202 {
			t.Fatalf("process: %d %s", resp.StatusCode, b)
		}
		ids = append([]string{decode[acds.Accepted](t, b).RequestID}, ids...)
		time.Sleep(2 * time.Millisecond) // distinct creation times, newest first
	}
	var got []string
	var sizes []int
	cur := ""
	for range 10 {
		resp, b := h.do("GET", "/v1/requests?limit=100&cursor="+cur, s.Token, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("list: %d %s", resp.StatusCode, b)
		}
		l := decode[acds.RequestList](t, b)
		sizes = append(sizes, len(l.Items))
		for _, it := range l.Items {
			got = append(got, it.RequestID)
		}
		if cur = l.NextCursor; cur == "" {
			break
		}
	}
	// Each input is over 20 KB: a page ends with its third request.
	if fmt.Sprint(sizes) != "[3 2]" {
		t.Errorf("page sizes %v, want [3 2]", sizes)
	}
	if fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Errorf("listed %v, want %v", got, ids)
	}
}
