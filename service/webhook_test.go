package service_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/portal"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/service"
	"github.com/acds-project/acds/webhook"
)

// TestWebhookDelivered: a service as acds serve opens it accepts a
// callbackUrl and delivers the signed outcome, which verifies against
// the boot evidence of GET /v1/attestation under an independent policy.
// It failed before: the replica wrapper hid the enclave's signing, so
// every callbackUrl got 400 "this server does not deliver webhooks".
func TestWebhookDelivered(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type hit struct {
		sig  string
		body []byte
	}
	got := make(chan hit, 10)
	rc := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, webhook.MaxPayloadSize+1))
		got <- hit{r.Header.Get(webhook.SignatureHeader), body}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rc.Close()
	roots := x509.NewCertPool()
	roots.AddCert(rc.Certificate())
	tlsConf := rc.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	tlsConf.RootCAs = roots
	_, c := open(t, service.Options{DataDir: dataDir(t), Configure: func(cfg *server.Config) {
		// The receiver is on loopback with a CA of its own.
		cfg.Webhooks = server.WebhookOptions{Guard: portal.Guard{AllowPrivate: true}, TLS: tlsConf,
			Poll: 10 * time.Millisecond, MinBackoff: 20 * time.Millisecond, MaxBackoff: 80 * time.Millisecond}
	}})
	c, _ = session(t, ctx, c)
	acc, err := c.Process(ctx, acds.ProcessRequest{Data: json.RawMessage(sampleBundle), OutputFormat: acds.OutputFHIRR4,
		CallbackURL: rc.URL + "/hook"})
	if err != nil {
		t.Fatalf("a request with a callbackUrl was refused: %v", err)
	}
	rec, err := c.Wait(ctx, acc.RequestID)
	if err != nil || rec.Status != acds.StatusCompleted {
		t.Fatalf("request %s: %+v %v", acc.RequestID, rec, err)
	}
	var h hit
	select {
	case h = <-got:
	case <-ctx.Done():
		t.Fatal("no delivery")
	}
	att, err := c.Attestation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, res, err := webhook.Verify(mustVerifier(t, offlinePolicy(t)), att.Boot, h.sig, h.body)
	if err != nil || !res.Valid {
		t.Fatalf("the delivery does not verify: %v", err)
	}
	if p.RequestID != acc.RequestID || p.Status != acds.StatusCompleted || p.OutputDigest != rec.Result.OutputDigest {
		t.Fatalf("payload %+v, record digest %s", p, rec.Result.OutputDigest)
	}
}
