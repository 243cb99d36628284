package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation/disclosure"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
)

// disclosureVerifier records the disclosure the handler hands on.
type disclosureVerifier struct {
	servertest.Verifier
	mu   sync.Mutex
	got  []byte
	resp acds.VerifyResponse
}

func (v *disclosureVerifier) VerifyDisclosure(ctx context.Context, d []byte) (*acds.VerifyResponse, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.got = bytes.Clone(d)
	r := v.resp
	return &r, nil
}

// POST /v1/verify with the extension field disclosure: handed on to the
// verifier when its bundle is the request's; refused with a field problem
// when it is not a disclosure, carries another bundle, or comes with an
// output.
func TestVerifyDisclosureRouting(t *testing.T) {
	dv := &disclosureVerifier{resp: acds.VerifyResponse{Valid: true, Details: acds.VerifyDetails{Disclosed: []acds.DisclosedEntry{{Index: 1, Ref: "Observation/o1"}}}}}
	h := newHarness(t, func(c *server.Config) { c.Verifier = dv })
	out := []byte(`{"entry":[{"a":1},{"resource":{"id":"o1","resourceType":"Observation"}}],"resourceType":"Bundle"}`)
	bundle := []byte("bundle bytes")
	d, err := disclosure.New(bundle, bytes.Repeat([]byte{3}, 32), out, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	dj, _ := d.Marshal()
	b64 := base64.StdEncoding.EncodeToString(bundle)

	post := func(body map[string]any) (*http.Response, []byte) {
		raw, _ := json.Marshal(body)
		return h.do("POST", "/v1/verify", "", raw)
	}
	resp, body := post(map[string]any{"attestationBundle": b64, "disclosure": json.RawMessage(dj)})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var vr acds.VerifyResponse
	if err := json.Unmarshal(body, &vr); err != nil || !vr.Valid || len(vr.Details.Disclosed) != 1 {
		t.Fatalf("response %s (%v)", body, err)
	}
	if p, err := disclosure.Parse(dv.got); err != nil || len(p.Entries) != 1 {
		t.Fatalf("the verifier got %q (%v)", dv.got, err)
	}

	for name, body := range map[string]map[string]any{
		"not a disclosure": {"attestationBundle": b64, "disclosure": map[string]any{"type": "x"}},
		"another bundle":   {"attestationBundle": base64.StdEncoding.EncodeToString([]byte("other")), "disclosure": json.RawMessage(dj)},
		"with output":      {"attestationBundle": b64, "disclosure": json.RawMessage(dj), "output": json.RawMessage(out)},
	} {
		resp, raw := post(body)
		var p acds.Problem
		_ = json.Unmarshal(raw, &p)
		if resp.StatusCode != http.StatusBadRequest || len(p.Errors) != 1 || p.Errors[0].Field != "disclosure" {
			t.Errorf("%s: status %d, %s", name, resp.StatusCode, raw)
		}
	}
}

// A completed fhir_r4 request returns the disclosure key with its result;
// the signed claims carry the commitment under that key, and the bundle
// does not carry the key.
func TestResultCarriesDisclosureKey(t *testing.T) {
	h := newHarness(t, nil)
	tok := h.anon().Token
	data := `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","id":"p"}},{"resource":{"resourceType":"Observation","id":"o"}}]}`
	resp, body := h.do("POST", "/v1/process", tok, []byte(`{"outputFormat":"fhir_r4","data":`+data+`}`))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var acc acds.Accepted
	_ = json.Unmarshal(body, &acc)
	req := h.wait(tok, acc.RequestID, 10*time.Second)
	if req.Result == nil || req.Result.DisclosureKey == "" {
		t.Fatalf("no disclosure key: %+v", req)
	}
	key, err := base64.StdEncoding.DecodeString(req.Result.DisclosureKey)
	if err != nil || len(key) != disclosure.KeySize {
		t.Fatalf("key %q: %v", req.Result.DisclosureKey, err)
	}
	bundle, _ := base64.StdEncoding.DecodeString(req.Result.AttestationBundle)
	var fb servertest.FakeBundle
	if err := json.Unmarshal(bundle, &fb); err != nil {
		t.Fatal(err)
	}
	c, err := disclosure.Commit(key, req.Result.Output)
	if err != nil {
		t.Fatal(err)
	}
	if fb.Claims.Entries == nil || !bytes.Equal(fb.Claims.Entries.Root, c.Root[:]) || fb.Claims.Entries.Count != 2 {
		t.Fatalf("claims commitment %+v, want %x/2", fb.Claims.Entries, c.Root)
	}
	if bytes.Contains(bundle, key) || bytes.Contains(bundle, []byte(req.Result.DisclosureKey)) {
		t.Fatal("the bundle carries the disclosure key")
	}
}
