package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/portal"
)

// TestResultRecord: the stored result is what encoding a Result (without
// HTML escaping) gives, byte for byte, for canonical output; it decodes to
// the same Result; and its output member keeps the pipeline's exact
// bytes, even where encoding/json would have compacted them away (the
// digest is over those bytes).
func TestResultRecord(t *testing.T) {
	r := &acds.Result{
		OutputFormat:      acds.OutputFHIRR4,
		Output:            json.RawMessage(`{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","id":"p<1>","name":[{"text":"A & \"B\" \u00e9"}]}}]}`),
		OutputDigest:      "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		AttestationBundle: "oQF4G2Fj/GRz+/8=",
	}
	got := resultRecord(r)
	want, err := marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("resultRecord:\n%s\nencoding/json:\n%s", got, want)
	}
	var back acds.Result
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if back.OutputFormat != r.OutputFormat || !bytes.Equal(back.Output, r.Output) || back.OutputDigest != r.OutputDigest ||
		back.AttestationBundle != r.AttestationBundle {
		t.Errorf("decoded %+v, want %+v", back, r)
	}

	spaced := *r
	spaced.Output = json.RawMessage("{ \"resourceType\" : \"Bundle\" }")
	if err := json.Unmarshal(resultRecord(&spaced), &back); err != nil || !bytes.Equal(back.Output, spaced.Output) {
		t.Errorf("output with white space stored as %q (%v), want it unchanged", back.Output, err)
	}
}

// BenchmarkResultRecord stores a ~1 MB output: assembling the record
// (resultRecord) against encoding it with encoding/json (marshal, which the
// worker used before), in the same run.
func BenchmarkResultRecord(b *testing.B) {
	var out bytes.Buffer
	out.WriteString(`{"resourceType":"Bundle","type":"collection","entry":[`)
	for i := 0; out.Len() < 1<<20; i++ {
		if i > 0 {
			out.WriteByte(',')
		}
		out.WriteString(`{"fullUrl":"https://acds.invalid/fhir/Observation/o","resource":{"resourceType":"Observation","id":"o","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8302-2","display":"Body Height"}]},"valueQuantity":{"value":172.5,"unit":"cm"}}}`)
	}
	out.WriteString(`]}`)
	r := &acds.Result{OutputFormat: acds.OutputFHIRR4, Output: out.Bytes(), OutputDigest: "sha256:00", AttestationBundle: "AAAA"}
	var assembled, encoded int64
	b.SetBytes(int64(out.Len()))
	for b.Loop() {
		t0 := time.Now().UnixNano()
		_ = resultRecord(r)
		t1 := time.Now().UnixNano()
		_, _ = marshal(r)
		t2 := time.Now().UnixNano()
		assembled += t1 - t0
		encoded += t2 - t1
	}
	b.ReportMetric(float64(assembled)/1e6/float64(b.N), "assembled-ms/op")
	b.ReportMetric(float64(encoded)/1e6/float64(b.N), "marshal-ms/op")
	b.ReportMetric(float64(assembled)/float64(encoded), "ratio")
}

// TestMPCTLSClaims: the claims of a fetch name every session with its own
// host and the request line sent in it, not the first request line
// copied into each.
func TestMPCTLSClaims(t *testing.T) {
	cov := &acds.Coverage{Everything: true, Requests: []acds.CoverageRequest{{RequestLine: "GET /fhir/Patient/7/$everything HTTP/1.1", Status: 200, Pages: 2, Entries: 9}}}
	r := &portal.Result{
		Host:         "portal.example",
		RequestLines: []string{"GET /fhir/Patient/7/$everything HTTP/1.1", "GET /fhir/Patient/7/$everything?page=2 HTTP/1.1"},
		Sessions: []portal.Session{
			{Host: "auth.example", Statement: []byte("s1"), RequestLines: []string{"GET /fhir/.well-known/smart-configuration HTTP/1.1", "POST /token HTTP/1.1"}},
			{Host: "portal.example", Statement: []byte("s2"), RequestLines: []string{"GET /fhir/.well-known/smart-configuration HTTP/1.1", "GET /fhir/Patient/7/$everything?page=2 HTTP/1.1"}},
			{Host: "portal.example", Statement: []byte("s3")},
		},
		Coverage: cov,
	}
	c, statements := mpctlsClaims(r)
	want := []attestation.Session{
		{Host: "auth.example", RequestLine: "GET /fhir/.well-known/smart-configuration HTTP/1.1"},
		{Host: "portal.example", RequestLine: "GET /fhir/Patient/7/$everything?page=2 HTTP/1.1"},
		{Host: "portal.example", RequestLine: "GET /fhir/Patient/7/$everything HTTP/1.1"}, // unknown: the record's request
	}
	if c.Source.Kind != acds.SourceMPCTLS || !slices.Equal(c.Source.Sessions, want) {
		t.Fatalf("claims = %+v, want sessions %+v", c.Source, want)
	}
	if c.Coverage != cov || len(statements) != 3 || string(statements[0]) != "s1" || string(statements[2]) != "s3" {
		t.Fatalf("coverage %+v, statements %q", c.Coverage, statements)
	}
}

// TestRunningAttemptsTwoOfOneRequest: when one request has two local
// attempts, the first one's end forgets only itself, so a DELETE still
// stops the second.
func TestRunningAttemptsTwoOfOneRequest(t *testing.T) {
	var a runningAttempts
	ctx1, stop1 := context.WithCancelCause(context.Background())
	ctx2, stop2 := context.WithCancelCause(context.Background())
	remove1 := a.add("r", stop1)
	remove2 := a.add("r", stop2)
	remove1()
	a.stop("r")
	if !errors.Is(context.Cause(ctx2), errDeleted) {
		t.Fatalf("the second attempt was not stopped: %v", context.Cause(ctx2))
	}
	if ctx1.Err() != nil {
		t.Fatal("the ended first attempt was stopped again")
	}
	remove2()
	if len(a.m) != 0 {
		t.Fatalf("attempts left: %v", a.m)
	}
}
