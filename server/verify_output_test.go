package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/server"
)

// recordingVerifier records the output bytes the handler hands on.
type recordingVerifier struct {
	mu     sync.Mutex
	output []byte
}

func (v *recordingVerifier) Verify(ctx context.Context, bundle, output []byte) (*acds.VerifyResponse, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.output = bytes.Clone(output)
	return &acds.VerifyResponse{Details: acds.VerifyDetails{Reasons: []string{}}}, nil
}

// TestVerifyHandsOnTheDigestedBytes: POST /v1/verify hands the verifier
// the bytes acds.OutputBytes recovers from the output it was sent — for a
// pretty-printed copy that escapes < and & (json.MarshalIndent), the
// canonical bytes; compacting alone left the escapes, and the digest did
// not match.
func TestVerifyHandsOnTheDigestedBytes(t *testing.T) {
	rv := &recordingVerifier{}
	h := newHarness(t, func(c *server.Config) { c.Verifier = rv })
	canonical := []byte(`{"entry":[{"resource":{"resourceType":"Patient","text":{"div":"<div>José &amp; Zoë</div>"}}}],"resourceType":"Bundle","type":"collection"}`)
	pretty, err := json.MarshalIndent(json.RawMessage(canonical), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"attestationBundle": "aGVsbG8=", "output": json.RawMessage(pretty)})
	resp, _ := h.do("POST", "/v1/verify", "", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if !bytes.Equal(rv.output, canonical) {
		t.Fatalf("the verifier got\n%s\nwant\n%s", rv.output, canonical)
	}
}
