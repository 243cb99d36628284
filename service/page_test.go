package service_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation/disclosure"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/service"
)

// TestServicePageAndDisclosure: the verifier the service builds (its own
// policy, then the replicas registered in its store) serves everything
// the server offers on top of POST /v1/verify: the report page (GET and
// POST /verify) and disclosures in POST /v1/verify. Both answered 503
// once the service's verifier stopped being the plain one.
func TestServicePageAndDisclosure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svc, err := service.Open(ctx, service.Options{DataDir: dataDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	ts := httptest.NewServer(svc.Handler())
	t.Cleanup(ts.Close)
	c, err := client.New(ts.URL, &client.Options{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c, _ = session(t, ctx, c)
	rec := process(t, ctx, c, acds.OutputFHIRR4)

	resp, err := http.Get(ts.URL + "/verify")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(page, []byte(`enctype="multipart/form-data"`)) {
		t.Fatalf("GET /verify: %d\n%s", resp.StatusCode, page)
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("attestationBundle", "bundle.b64")
	io.WriteString(fw, rec.Result.AttestationBundle)
	mw.Close()
	resp, err = http.Post(ts.URL+"/verify", mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), `data-valid="true"`) {
		t.Fatalf("POST /verify: %d\n%s", resp.StatusCode, page)
	}

	bundle, _ := base64.StdEncoding.DecodeString(rec.Result.AttestationBundle)
	key, _ := base64.StdEncoding.DecodeString(rec.Result.DisclosureKey)
	d, err := disclosure.New(bundle, key, rec.Result.Output, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	disc, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Verify(ctx, acds.VerifyRequest{AttestationBundle: rec.Result.AttestationBundle, Disclosure: disc})
	if err != nil || !v.Valid || len(v.Details.Disclosed) != 1 {
		t.Fatalf("POST /v1/verify with a disclosure: %+v %v", v, err)
	}
}
