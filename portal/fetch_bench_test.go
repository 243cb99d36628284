package portal_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/acds-project/acds/mpctls/notary/notarytest"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/demo/demoportal"
	"github.com/acds-project/acds/portal"
)

// plainFetch is the baseline: a plain net/http client with Basic auth
// reading $everything and its next pages, decoding each page only as far
// as its links. It returns the bytes read.
func plainFetch(b *testing.B, hc *http.Client, u string) int {
	n := 0
	for u != "" {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		req.SetBasicAuth(demoportal.Username, demoportal.Password)
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("baseline: %v %d", err, resp.StatusCode)
		}
		n += len(body)
		var p struct {
			Link []struct {
				Relation string `json:"relation"`
				URL      string `json:"url"`
			} `json:"link"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			b.Fatal(err)
		}
		u = ""
		for _, l := range p.Link {
			if l.Relation == "next" {
				u = l.URL
			}
		}
	}
	return n
}

// BenchmarkFetch1MB fetches the same ~1 MB demo patient (demoportal.PatientID(3))
// (a) with a plain net/http client and Basic auth and (b) through the
// portal.Fetcher over a real notary and a fresh MPC-TLS prover per fetch, with
// the fhir-basic connector; both in every iteration, so both run under
// the same machine load. It reports each in ms/op and the ratio b/a.
func BenchmarkFetch1MB(b *testing.B) {
	p, f, _ := notarizedSetup(b, demoportal.Options{Patients: 4}, notarytest.LoopbackOnly)
	f.Connector.Count = 0 // the portal's page size, as the baseline
	id := demoportal.PatientID(3)
	base := "https://" + portalHost + ":" + p.Port + "/fhir"
	plainTr := portal.Guard{AllowPrivate: true}.Transport(&tls.Config{RootCAs: p.CertPool()})
	hc := &http.Client{Transport: plainTr}
	defer plainTr.CloseIdleConnections()
	req := portal.Request{SystemType: acds.SystemFHIRBasic, PortalURL: base, RecordID: id, Credentials: demoCreds}
	var plain, notarized time.Duration
	var plainBytes, fhirBytes, sessions int
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		plainBytes = plainFetch(b, hc, p.Base+"/Patient/"+id+"/$everything")
		plainTr.CloseIdleConnections() // a fresh connection each time, as the prover has
		t1 := time.Now()
		res, err := f.Fetch(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		plain += t1.Sub(t0)
		notarized += t2.Sub(t1)
		fhirBytes, sessions = len(res.FHIR), len(res.Sessions)
	}
	n := float64(b.N)
	b.ReportMetric(float64(plain)/1e6/n, "plain-ms/op")
	b.ReportMetric(float64(notarized)/1e6/n, "notarized-ms/op")
	b.ReportMetric(float64(notarized)/float64(plain), "ratio")
	b.ReportMetric(float64(plainBytes), "plain-bytes")
	b.ReportMetric(float64(fhirBytes), "fhir-bytes")
	b.ReportMetric(float64(sessions), "sessions")
}
