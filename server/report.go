package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/disclosure"
	"github.com/acds-project/acds/verify"
	"github.com/acds-project/acds/verify/report"
)

// reportReadTimeout bounds how long reading one upload of the report page
// may take, whatever the http.Server's own timeouts.
const reportReadTimeout = time.Minute

// reportVerifiers is what the report page needs of the configured
// Verifier: the verify.Verifier(s) it decides with, for the whole Result
// (the JSON object of POST /v1/verify is a summary of it). The Verifier of
// [Verify] is one; a [PageVerifiers] names several; a Verifier of another
// kind serves POST /v1/verify but no page.
func (s *Server) reportVerifiers(ctx context.Context) []*verify.Verifier {
	switch v := s.cfg.Verifier.(type) {
	case verifier:
		return []*verify.Verifier{v.v}
	case PageVerifiers:
		return v.PageVerifiers(ctx)
	}
	return nil
}

// PageVerifiers is implemented by a Verifier that is not one
// *verify.Verifier but decides with several in turn (a replica's own
// policy, then the policy of every replica sharing its store): the report
// page, which shows a verify.Result in full, verifies with each in order
// and shows the first valid result, or the first result when none is
// valid, so that it says what POST /v1/verify says.
type PageVerifiers interface {
	PageVerifiers(ctx context.Context) []*verify.Verifier
}

// firstValid runs check with each verifier in order and returns the
// first valid result with its verifier, or else the first result; err is
// the first verifier's error (a malformed input fails all alike).
func firstValid(vs []*verify.Verifier, check func(*verify.Verifier) (*verify.Result, error)) (*verify.Result, *verify.Verifier, error) {
	var first *verify.Result
	for i, v := range vs {
		r, err := check(v)
		if err != nil {
			if i == 0 {
				return nil, nil, err
			}
			continue
		}
		if r.Valid {
			return r, v, nil
		}
		if i == 0 {
			first = r
		}
	}
	return first, vs[0], nil
}

// pagePath is the path of the report page as the client sees it (with the
// prefix the handler is mounted under), the target of its form.
func pagePath(r *http.Request) string {
	prefix := ""
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil {
		if p, ok := strings.CutSuffix(u.Path, r.URL.Path); ok {
			prefix = strings.TrimSuffix(p, "/")
		}
	}
	return prefix + "/verify"
}

// writePage answers with a report page: HTML under the page's CSP, never
// cached, never framed, never sniffed.
func writePage(w http.ResponseWriter, status int, in report.Input) {
	page, err := report.Render(in)
	if err != nil {
		writeProblem(w, acds.NewProblem(acds.ProblemInternal, "the report page could not be rendered"))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", report.CSP(true))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", fmt.Sprint(len(page)))
	w.WriteHeader(status)
	_, _ = w.Write(page)
}

// handleReportPage serves GET /verify: the upload form.
func (s *Server) handleReportPage(w http.ResponseWriter, r *http.Request) {
	in := report.Input{Upload: pagePath(r)}
	status := http.StatusOK
	if len(s.reportVerifiers(r.Context())) == 0 {
		in.Error = "verification is not available on this server (no verifier built in); use acds verify BUNDLE --html FILE offline"
		status = http.StatusServiceUnavailable
	}
	writePage(w, status, in)
}

// errUpload is a refused upload: its status and the message the page shows.
type errUpload struct {
	status int
	msg    string
}

func (e *errUpload) Error() string { return e.msg }

// readUpload reads the multipart form of the report page: the bundle
// (field attestationBundle, at most attestation.MaxBundleTextSize bytes)
// and the optional output (field output, at most MaxProcessBody), or a
// disclosure alone (field disclosure, at most disclosure.MaxSize), the
// whole body at most MaxProcessBody plus the bundle's size, within
// reportReadTimeout.
func (s *Server) readUpload(w http.ResponseWriter, r *http.Request) (bundle, output, disc []byte, err error) {
	mt, params, perr := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if perr != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return nil, nil, nil, &errUpload{http.StatusUnsupportedMediaType, "the page posts multipart/form-data; to send JSON use POST /v1/verify"}
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(reportReadTimeout))
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxProcessBody+attestation.MaxBundleTextSize)
	reader, merr := r.MultipartReader()
	if merr != nil {
		return nil, nil, nil, &errUpload{http.StatusBadRequest, "not a multipart form: " + merr.Error()}
	}
	var gotBundle bool
	for {
		part, err := reader.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, nil, uploadReadError(err)
		}
		var max int64
		var dst *[]byte
		switch part.FormName() {
		case "attestationBundle":
			max, dst, gotBundle = attestation.MaxBundleTextSize, &bundle, true
		case "output":
			max, dst = s.cfg.MaxProcessBody, &output
		case "disclosure":
			max, dst = min(s.cfg.MaxProcessBody, disclosure.MaxSize), &disc
		default:
			max = 0
		}
		b, err := io.ReadAll(io.LimitReader(part, max+1))
		if err != nil {
			return nil, nil, nil, uploadReadError(err)
		}
		if int64(len(b)) > max {
			if dst == nil {
				return nil, nil, nil, &errUpload{http.StatusBadRequest, fmt.Sprintf("unknown form field %q", part.FormName())}
			}
			return nil, nil, nil, &errUpload{http.StatusRequestEntityTooLarge, fmt.Sprintf("%s: larger than %d bytes", part.FormName(), max)}
		}
		if dst != nil {
			*dst = b
		}
	}
	if len(disc) > 0 {
		if len(bundle) > 0 || len(output) > 0 {
			return nil, nil, nil, &errUpload{http.StatusBadRequest, "disclosure: send it alone: it carries its bundle and stands for the output"}
		}
		return nil, nil, disc, nil
	}
	if !gotBundle || len(bundle) == 0 {
		return nil, nil, nil, &errUpload{http.StatusBadRequest, "attestationBundle: choose a bundle file (or a disclosure)"}
	}
	return bundle, output, nil, nil
}

func uploadReadError(err error) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return &errUpload{http.StatusRequestEntityTooLarge, fmt.Sprintf("the upload is larger than %d bytes", tooBig.Limit)}
	}
	return &errUpload{http.StatusBadRequest, "the upload could not be read: " + err.Error()}
}

// reportDisclosure answers POST /verify with a disclosure: verified as
// POST /v1/verify verifies one, and shown with the bundle it carries.
func (s *Server) reportDisclosure(w http.ResponseWriter, in report.Input, vs []*verify.Verifier, disc []byte) {
	d, err := disclosure.Parse(disc)
	var bundle []byte
	if err == nil {
		bundle, err = d.Bundle()
	}
	if err != nil {
		in.Error = "disclosure: not a disclosure: " + err.Error()
		writePage(w, http.StatusBadRequest, in)
		return
	}
	res, v, err := firstValid(vs, func(v *verify.Verifier) (*verify.Result, error) { return v.VerifyDisclosure(disc) })
	if err != nil {
		in.Error = "disclosure: " + err.Error()
		writePage(w, http.StatusBadRequest, in)
		return
	}
	in.Result, in.Bundle, in.Verifier, in.Disclosure = res, bundle, v, true
	in.Notes = []string{"checked by this server, offline, under its own policy: the code hashes it allows are listed below"}
	if v != vs[0] {
		in.Notes = append(in.Notes, "valid only under the trust anchors that other replicas registered in this server's store: whoever can write that database can add a trusted enclave")
	}
	writePage(w, http.StatusOK, in)
}

// handleReportUpload serves POST /verify: it verifies the uploaded bundle
// (and output) as POST /v1/verify does, with the same verifier and the
// same reading rules, and answers with the report page.
func (s *Server) handleReportUpload(w http.ResponseWriter, r *http.Request) {
	in := report.Input{Upload: pagePath(r)}
	vs := s.reportVerifiers(r.Context())
	if len(vs) == 0 {
		in.Error = "verification is not available on this server (no verifier built in); use acds verify BUNDLE --html FILE offline"
		writePage(w, http.StatusServiceUnavailable, in)
		return
	}
	bundleText, outputText, disc, err := s.readUpload(w, r)
	var bad *errUpload
	if errors.As(err, &bad) {
		in.Error = bad.msg
		writePage(w, bad.status, in)
		return
	}
	if disc != nil {
		s.reportDisclosure(w, in, vs, disc)
		return
	}
	bundle, err := attestation.ReadBundle(bundleText)
	if err != nil || len(bundle) == 0 {
		in.Error = "attestationBundle: not an attestation bundle (base64 or CBOR)"
		writePage(w, http.StatusBadRequest, in)
		return
	}
	var output []byte
	if len(outputText) > 0 {
		// The rule of POST /v1/verify: a pretty-printed or re-encoded copy
		// gives back the digested canonical bytes.
		if output, err = acds.OutputBytes(outputText); err != nil {
			in.Error = "output: must be the JSON output the bundle attests"
			writePage(w, http.StatusBadRequest, in)
			return
		}
	}
	res, v, err := firstValid(vs, func(v *verify.Verifier) (*verify.Result, error) {
		if output != nil {
			return v.VerifyOutput(bundle, output)
		}
		return v.Verify(bundle)
	})
	if err != nil {
		in.Error = "attestationBundle: " + notABundle(err)
		writePage(w, http.StatusBadRequest, in)
		return
	}
	in.Result, in.Bundle, in.Output, in.Verifier = res, bundle, output, v
	in.Notes = []string{"checked by this server, offline, under its own policy: the code hashes it allows are listed below"}
	if v != vs[0] {
		in.Notes = append(in.Notes, "valid only under the trust anchors that other replicas registered in this server's store: whoever can write that database can add a trusted enclave")
	}
	writePage(w, http.StatusOK, in)
}
