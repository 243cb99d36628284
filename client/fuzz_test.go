package client

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// FuzzProblemFrom feeds arbitrary error responses (body, media type,
// Retry-After) to the parser of untrusted server answers: it never panics,
// keeps the status, reads at most maxErrorBody bytes and caps the detail
// of non-problem bodies.
func FuzzProblemFrom(f *testing.F) {
	f.Add(429, "application/problem+json", "3", []byte(`{"type":"urn:acds:problem:rate-limited","title":"Rate limited","status":429}`))
	f.Add(503, "text/html", "Wed, 21 Oct 2015 07:28:00 GMT", []byte(`<html>bad gateway</html>`))
	f.Add(400, "application/json", "-1", []byte(`{"type":1}`))
	f.Add(500, "application/problem+json; charset=utf-8", "", []byte(`{"type":"x","errors":[{"field":null}],"operationOutcome":[]}`))
	f.Fuzz(func(t *testing.T, status int, ct, retryAfter string, body []byte) {
		if status < 100 || status > 999 {
			status = 500
		}
		r := &countReader{r: bytes.NewReader(body)}
		resp := &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(r)}
		resp.Header.Set("Content-Type", ct)
		resp.Header.Set("Retry-After", retryAfter)
		p := problemFrom(resp)
		if p == nil || p.Status != status || p.Type == "" {
			t.Fatalf("problem = %+v", p)
		}
		if r.n > maxErrorBody {
			t.Fatalf("read %d bytes", r.n)
		}
		if p.RetryAfter < 0 || p.RetryAfter > 86400 {
			t.Fatalf("negative Retry-After %d", p.RetryAfter)
		}
	})
}

type countReader struct {
	r io.Reader
	n int
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
