package report

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sevsnp"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/mpctls"
	"github.com/acds-project/acds/verify"
)

// Input is what a report shows.
type Input struct {
	// Result is the verification to render. Nil only on an upload page
	// that has nothing verified yet (Upload set).
	Result *verify.Result
	// Bundle is the bundle bytes Result came from (raw CBOR, as
	// attestation.ReadBundle returns them): the evidence chain, boot keys
	// and notary statements are read from it. Zero value: those sections
	// say the bundle was not given.
	Bundle []byte
	// Output is the output Result checked (verify.VerifyOutput), shown as a
	// summary. Zero value: no output section.
	Output []byte
	// Verifier is the verifier that produced Result; when set, the page
	// lists the code hashes its policy allows and says whether the policy
	// has a manifest. Zero value: the allowed hashes are not listed.
	Verifier *verify.Verifier
	// Notes are lines about the verification the caller adds (where the
	// policy came from, which relaxation a flag asked for). Zero value:
	// none.
	Notes []string
	// Disclosure says Result came from verify.VerifyDisclosure: the page
	// shows the disclosure check and lists the disclosed entries. Bundle
	// is then the bundle the disclosure carries. Zero value: no disclosure.
	Disclosure bool
	// Upload, when set, adds a form that POSTs a bundle (field
	// "attestationBundle") and optionally an output (field "output"), or a
	// disclosure alone (field "disclosure"), as multipart/form-data to this
	// same-origin path. Zero value: no form (an offline report).
	Upload string
	// Error is shown above the form, e.g. why an upload was refused. Zero
	// value: none.
	Error string
}

// The inline stylesheet: the only inline content, allowed by its hash.
const style = `body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:70rem;padding:1rem 1.5rem;color:#1b1f24;background:#fff}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #d0d7de;padding-bottom:.2rem}
table{border-collapse:collapse;width:100%;margin:.5rem 0}th,td{text-align:left;vertical-align:top;padding:.3rem .5rem;border-bottom:1px solid #eaeef2}
th{width:14rem;font-weight:600}code,pre,.h{font-family:ui-monospace,monospace;font-size:.85rem;word-break:break-all}
pre{background:#f6f8fa;padding:.6rem;overflow:auto;white-space:pre-wrap}
.verdict{font-size:1.6rem;font-weight:700;padding:.6rem 1rem;border-radius:.4rem;margin:1rem 0}
.valid{background:#dafbe1;color:#116329}.invalid{background:#ffebe9;color:#a40e26}
.pass{color:#116329;font-weight:600}.fail{color:#a40e26;font-weight:600}.na,.nr{color:#57606a;font-weight:600}
ol.chain li{margin:.3rem 0}.note{color:#57606a}form{margin:1rem 0;padding:1rem;border:1px dashed #8c959f;border-radius:.4rem}
label{display:block;margin:.4rem 0}.error{color:#a40e26;font-weight:600}`

var styleHash = func() string {
	h := sha256.Sum256([]byte(style))
	return "'sha256-" + base64.StdEncoding.EncodeToString(h[:]) + "'"
}()

// CSP returns the Content-Security-Policy of a report page. A server
// sends it as a header, with frameAncestors true (frame-ancestors 'none':
// the page cannot be framed); the document also carries it in a meta
// element without frame-ancestors, which a meta element cannot set, so
// a saved report is as confined when opened from disk.
func CSP(frameAncestors bool) string {
	p := "default-src 'none'; style-src " + styleHash + "; img-src 'none'; form-action 'self'; base-uri 'none'"
	if frameAncestors {
		p += "; frame-ancestors 'none'"
	}
	return p
}

// ErrNoResult is returned by Render for an Input with neither a Result
// nor an upload form.
var ErrNoResult = errors.New("report: nothing to render: no result and no upload form")

// Render returns the report page of in, one HTML document.
func Render(in Input) ([]byte, error) {
	if in.Result == nil && in.Upload == "" {
		return nil, ErrNoResult
	}
	v := build(in)
	var buf bytes.Buffer
	if err := page.Execute(&buf, v); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return buf.Bytes(), nil
}

// Status of a check on the page.
const (
	StatusPass       = "pass"
	StatusFail       = "fail"
	StatusNotApply   = "does not apply"
	StatusNotReached = "not reached"
)

type checkRow struct {
	Name, Label, Status, Class string
	Reasons                    []string
}

type link struct {
	Role, Subject, Detail, Status, Class string
}

type notaryRow struct {
	Index                                    int
	Host, RequestLine, SNI, Subject, Address string
	Version, Suite, ChainDigest, Start, End  string
	KeyID, Traffic, Error                    string
}

type kv struct{ K, V string }

type obs struct{ Name, Value, When string }

type outputView struct {
	Digest, Attested, Match, Error string
	Counts                         []kv
	Total                          int
	Source                         string
	Observations                   []obs
	More                           int
}

type view struct {
	CSP          string
	Style        string
	HasResult    bool
	Valid        bool
	Verdict      string
	ResponseJSON string
	Checks       []checkRow
	Relaxations  []string
	Notes        []string
	Chain        []link
	ChainNote    string
	Measurement  []kv
	Allowed      []string
	Notary       []notaryRow
	NotaryNote   string
	Claims       []kv
	Coverage     *coverageView
	Boot         []kv
	Output       *outputView
	Disclosed    []kv
	Disclosure   bool
	Upload       string
	Error        string
	VerifiedAt   string
}

var checkOrder = []struct {
	c     verify.Check
	label string
}{
	{verify.CheckProfile, "the profile is supported and the policy allows it"},
	{verify.CheckSignature, "the boot signing key signed the claims (COSE_Sign1, ES256)"},
	{verify.CheckEvidence, "the TEE evidence verifies to the vendor root; debug and TCB as the policy requires"},
	{verify.CheckBinding, "the evidence's report data binds the boot keys and nonce"},
	{verify.CheckMeasurement, "the code hash is one the policy allows, and the one the claims name"},
	{verify.CheckNotary, "every notary statement: signed by a trusted notary, for the claimed host, in the time window"},
	{verify.CheckTime, "the issue time is not in the future (nor older than the policy's maximum age)"},
	{verify.CheckManifest, "the policy's manifest is valid at the verifier's clock"},
	{verify.CheckOutput, "the output's digest is the attested outputDigest"},
	{verify.CheckDisclosure, "every disclosed entry is under the signed commitment (its salted leaf, audit path, root and entry count)"},
	{verify.CheckStructure, "the bundle is consistent"},
}

func build(in Input) *view {
	v := &view{CSP: CSP(false), Style: style, Upload: in.Upload, Error: in.Error, Notes: in.Notes}
	r := in.Result
	if r == nil {
		return v
	}
	v.HasResult = true
	resp := r.Response()
	if resp.Details.Reasons == nil {
		resp.Details.Reasons = []string{}
	}
	v.Valid = resp.Valid
	v.Verdict = "INVALID"
	if resp.Valid {
		v.Verdict = "VALID"
	}
	if j, err := json.MarshalIndent(resp, "", "  "); err == nil {
		v.ResponseJSON = string(j)
	}
	v.VerifiedAt = r.VerifiedAt.UTC().Format(time.RFC3339)
	v.Relaxations = r.Relaxations
	v.Checks = checks(in)

	var b *attestation.Bundle
	if in.Bundle != nil {
		var err error
		if b, err = attestation.ParseBundle(in.Bundle); err != nil {
			b = nil
		}
	}
	v.Chain, v.ChainNote = chain(r, b, status(in, verify.CheckEvidence), status(in, verify.CheckBinding),
		status(in, verify.CheckSignature), status(in, verify.CheckOutput))
	v.Measurement, v.Allowed = measurement(in)
	v.Notary, v.NotaryNote = notary(r, b, status(in, verify.CheckNotary))
	v.Claims = claims(r)
	v.Coverage = coverage(r)
	v.Boot = boot(r)
	if in.Output != nil {
		v.Output = output(r, in.Output)
	}
	if in.Disclosure {
		v.Disclosure = true
		for _, d := range r.Disclosed {
			v.Disclosed = append(v.Disclosed, kv{strconv.Itoa(d.Index), d.Ref})
		}
	}
	return v
}

func failuresOf(r *verify.Result, c verify.Check) []string {
	var out []string
	for _, f := range r.Failures {
		if f.Check == c {
			out = append(out, f.Err.Error())
		}
	}
	return out
}

// status says what the page may claim about check c: a check is shown as
// passed only when the result establishes it, never because no failure
// was recorded for it.
func status(in Input, c verify.Check) string {
	r := in.Result
	if len(failuresOf(r, c)) > 0 {
		return StatusFail
	}
	claimsOK := r.Claims != nil
	switch c {
	case verify.CheckSignature:
		if claimsOK {
			return StatusPass
		}
		return StatusNotReached
	case verify.CheckProfile, verify.CheckEvidence, verify.CheckBinding:
		// EnclaveHashMatch is only ever true for authenticated evidence,
		// even when the claims' signature failed (TEEQuoteVerified false).
		if r.TEEQuoteVerified || r.EnclaveHashMatch {
			return StatusPass
		}
		return StatusNotReached
	case verify.CheckMeasurement:
		if r.EnclaveHashMatch {
			return StatusPass
		}
		return StatusNotReached
	case verify.CheckNotary:
		switch {
		case !claimsOK:
			return StatusNotReached
		case r.Claims.Source.Kind != acds.SourceMPCTLS:
			return StatusNotApply
		case r.MPCTLSVerified:
			return StatusPass
		}
		return StatusNotReached
	case verify.CheckTime:
		if claimsOK {
			return StatusPass
		}
		return StatusNotReached
	case verify.CheckManifest:
		if in.Verifier != nil && in.Verifier.Manifest() == nil {
			return StatusNotApply
		}
		return StatusPass
	case verify.CheckDisclosure:
		switch {
		case !in.Disclosure:
			return StatusNotApply
		case len(r.Disclosed) > 0:
			return StatusPass
		}
		return StatusNotReached
	case verify.CheckOutput:
		if !r.OutputChecked {
			if in.Output == nil {
				return StatusNotApply
			}
			return StatusNotReached
		}
		return StatusPass
	}
	return StatusPass
}

func class(s string) string {
	switch s {
	case StatusPass:
		return "pass"
	case StatusFail:
		return "fail"
	case StatusNotApply:
		return "na"
	}
	return "nr"
}

func checks(in Input) []checkRow {
	rows := make([]checkRow, 0, len(checkOrder))
	for _, c := range checkOrder {
		s := status(in, c.c)
		row := checkRow{Name: string(c.c), Label: c.label, Status: s, Class: class(s), Reasons: failuresOf(in.Result, c.c)}
		switch {
		case s == StatusNotApply && c.c == verify.CheckNotary:
			row.Reasons = []string{"raw submission: no portal session to notarize"}
		case s == StatusNotApply && c.c == verify.CheckOutput:
			row.Reasons = []string{"no output was given to check"}
		case s == StatusNotApply && c.c == verify.CheckManifest:
			row.Reasons = []string{"the policy has no manifest"}
		case s == StatusNotReached:
			row.Reasons = []string{"not established: a check it depends on failed (see above)"}
		}
		rows = append(rows, row)
	}
	return rows
}

func fingerprint(der []byte) string {
	if len(der) == 0 {
		return ""
	}
	h := sha256.Sum256(der)
	return "SHA-256 " + hex.EncodeToString(h[:])
}

func certLink(role string, der []byte, st string) link {
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return link{Role: role, Subject: "(not a certificate: " + err.Error() + ")", Status: st, Class: class(st)}
	}
	return link{Role: role, Subject: c.Subject.String(),
		Detail: fmt.Sprintf("issued by %s; valid %s to %s; %s", c.Issuer.String(),
			c.NotBefore.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339), fingerprint(der)),
		Status: st, Class: class(st)}
}

// chain lists the evidence chain from the vendor root to the output, each
// link with the status of the check that establishes it.
func chain(r *verify.Result, b *attestation.Bundle, evidence, binding, signature, out string) ([]link, string) {
	if b == nil {
		return nil, "the bundle was not given to the report: the chain cannot be shown"
	}
	var links []link
	switch b.Boot.Profile {
	case attestation.ProfileSEVSNP, attestation.ProfileSEVSNPSim:
		ev, err := sevsnp.ParseEvidence(b.Boot.Evidence)
		if err != nil {
			return nil, "the evidence does not parse: " + err.Error()
		}
		root := "AMD root key (ARK), embedded in the verifier, per product line"
		if b.Boot.Profile == attestation.ProfileSEVSNPSim {
			root = "simulated ARK (not AMD's): trusted only under a policy allowing simulation"
		}
		if len(ev.ARK) > 0 {
			links = append(links, certLink("root (ARK)", ev.ARK, evidence))
			links[len(links)-1].Role = "root (ARK): " + root
		} else {
			links = append(links, link{Role: "root (ARK)", Subject: root, Status: evidence, Class: class(evidence)})
		}
		if len(ev.ASK) > 0 {
			links = append(links, certLink("intermediate (ASK)", ev.ASK, evidence))
		} else {
			links = append(links, link{Role: "intermediate (ASK)", Subject: "AMD signing key, embedded in the verifier", Status: evidence, Class: class(evidence)})
		}
		links = append(links, certLink("chip key (VCEK)", ev.VCEK, evidence))
		links = append(links, link{Role: "attestation report", Subject: "SEV-SNP ATTESTATION_REPORT signed by the VCEK",
			Detail: fmt.Sprintf("%d bytes; measurement %x", len(ev.Report), r.Measurement), Status: evidence, Class: class(evidence)})
	case attestation.ProfileTDX:
		links = append(links,
			link{Role: "root", Subject: "Intel SGX Root CA (embedded in the verifier, or the policy's)", Status: evidence, Class: class(evidence)},
			link{Role: "PCK certificate chain", Subject: "carried in the quote's certification data", Status: evidence, Class: class(evidence)},
			link{Role: "TD quote", Subject: "signed by the quoting enclave's attestation key", Detail: fmt.Sprintf("%d bytes", len(b.Boot.Evidence)), Status: evidence, Class: class(evidence)})
	case attestation.ProfileTPM:
		links = append(links,
			link{Role: "attestation key", Subject: "a TPM AK the policy pins, or one certified by the policy's roots", Status: evidence, Class: class(evidence)},
			link{Role: "TPM quote", Subject: "PCR quote signed by the AK", Detail: fmt.Sprintf("%d bytes", len(b.Boot.Evidence)), Status: evidence, Class: class(evidence)})
	default:
		links = append(links, link{Role: "evidence", Subject: "profile " + b.Boot.Profile, Status: evidence, Class: class(evidence)})
	}
	links = append(links,
		link{Role: "boot signing key", Subject: "P-256 key made at boot, bound by the report data SHA-512(\"acds/v1/boot\", keys, nonce)",
			Detail: fingerprint(b.Boot.SigningKey), Status: binding, Class: class(binding)},
		link{Role: "claims", Subject: "COSE_Sign1 (ES256) by the boot signing key", Detail: fmt.Sprintf("%d bytes", len(b.Statement)), Status: signature, Class: class(signature)})
	if r.Claims != nil {
		links = append(links, link{Role: "output", Subject: "outputDigest " + r.Claims.OutputDigest, Status: out, Class: class(out)})
	}
	return links, ""
}

func measurement(in Input) ([]kv, []string) {
	r := in.Result
	rows := []kv{{"profile", r.Profile}}
	if len(r.Measurement) > 0 {
		m := hex.EncodeToString(r.Measurement)
		if !r.TEEQuoteVerified {
			m += " (not authenticated: the evidence did not verify)"
		}
		rows = append(rows, kv{"reported by the evidence", m})
	} else {
		rows = append(rows, kv{"reported by the evidence", "(not established: see the checks)"})
	}
	if r.Claims != nil {
		rows = append(rows, kv{"named in the claims", hex.EncodeToString(r.Claims.Measurement)})
	}
	verdict := "no: see the measurement check"
	if r.EnclaveHashMatch {
		verdict = "yes"
	}
	rows = append(rows, kv{"allowed by the policy", verdict})
	var allowed []string
	if in.Verifier != nil {
		for _, m := range in.Verifier.Allowed(r.Profile) {
			allowed = append(allowed, hex.EncodeToString(m))
		}
		if m := in.Verifier.Manifest(); m != nil {
			rows = append(rows, kv{"manifest", fmt.Sprintf("issued by %s, valid %s to %s", m.Issuer,
				m.NotBefore.UTC().Format(time.RFC3339), m.NotAfter.UTC().Format(time.RFC3339))})
		}
	}
	return rows, allowed
}

func notary(r *verify.Result, b *attestation.Bundle, st string) ([]notaryRow, string) {
	if b == nil {
		return nil, "the bundle was not given to the report"
	}
	if len(b.NotaryStatements) == 0 {
		return nil, "no notary statement: the input was submitted directly (raw), not fetched from a portal"
	}
	var sessions []attestation.Session
	if r.Claims != nil {
		sessions = r.Claims.Source.Sessions
	}
	rows := make([]notaryRow, 0, len(b.NotaryStatements))
	for i, raw := range b.NotaryStatements {
		row := notaryRow{Index: i + 1}
		if i < len(sessions) {
			row.Host, row.RequestLine = sessions[i].Host, sessions[i].RequestLine
		}
		s, err := mpctls.ParseStatement(raw)
		if err != nil {
			row.Error = "does not parse: " + err.Error()
			rows = append(rows, row)
			continue
		}
		row.SNI = s.SNI
		row.Subject = s.CertSubject
		if row.Subject == "" {
			row.Subject = "(not recorded by this notary)"
		}
		row.Address = s.Address
		row.Version = tls.VersionName(s.Version)
		row.Suite = tls.CipherSuiteName(s.CipherSuite)
		row.ChainDigest = "SHA-256 " + hex.EncodeToString(s.CertChainDigest[:])
		row.Start = s.Start.UTC().Format(time.RFC3339Nano)
		row.End = s.End.UTC().Format(time.RFC3339Nano)
		row.KeyID = hex.EncodeToString(s.NotaryKeyID[:])
		row.Traffic = fmt.Sprintf("client→server %d records, %d bytes; server→client %d records, %d bytes",
			s.ClientRecords, s.ClientBytes, s.ServerRecords, s.ServerBytes)
		rows = append(rows, row)
	}
	note := "verified (mpc-tls check passed)"
	switch st {
	case StatusFail:
		note = "NOT verified: see the mpc-tls check; the values below are what the statements say, not established facts"
	case StatusNotReached, StatusNotApply:
		note = "not verified: the values below are what the statements say"
	}
	return rows, note + ". A statement names the server certificate by its subject, the name (SNI) it was verified for and its chain's digest; the certificate itself is not carried in the bundle."
}

func claims(r *verify.Result) []kv {
	c := r.Claims
	if c == nil {
		return nil
	}
	rows := []kv{
		{"requestId", c.RequestID},
		{"outputFormat", c.OutputFormat},
		{"outputDigest", c.OutputDigest},
		{"source", c.Source.Kind},
		{"issuedAt", c.IssuedAt.UTC().Format(time.RFC3339)},
		{"measurement", hex.EncodeToString(c.Measurement)},
	}
	if c.Source.InputDigest != "" {
		rows = append(rows, kv{"inputDigest", c.Source.InputDigest})
	}
	for i, s := range c.Source.Sessions {
		rows = append(rows, kv{fmt.Sprintf("session %d", i+1), fmt.Sprintf("%s — %s (statement %s)", s.Host, s.RequestLine, s.StatementDigest)})
	}
	if len(c.NotaryKey) > 0 {
		rows = append(rows, kv{"notaryKey (claimed)", hex.EncodeToString(c.NotaryKey)})
	}
	return rows
}

// coverageView is what the claims say a fetched record was assembled
// from; nil for a raw submission or claims that did not verify.
type coverageView struct {
	Summary     string
	Requests    []acds.CoverageRequest
	Unsupported string
}

func coverage(r *verify.Result) *coverageView {
	s := r.CoverageSummary()
	if s == "" {
		return nil
	}
	v := &coverageView{Summary: s}
	if c := r.Claims.Coverage; c != nil {
		v.Requests = c.Requests
		v.Unsupported = strings.Join(c.Unsupported, ", ")
	}
	return v
}

func boot(r *verify.Result) []kv {
	b := r.Boot
	if b == nil {
		return nil
	}
	rows := []kv{{"signing key", fingerprint(b.SigningKey)}}
	if len(b.TLSKey) > 0 {
		rows = append(rows, kv{"TLS key", fingerprint(b.TLSKey)})
	}
	rows = append(rows, kv{"boot nonce", hex.EncodeToString(b.Nonce)})
	return rows
}

func output(r *verify.Result, out []byte) *outputView {
	o := &outputView{Digest: attestation.Digest(out)}
	if canon, err := acds.OutputBytes(out); err == nil {
		o.Digest = attestation.Digest(canon)
	}
	switch {
	case r.Claims == nil:
		o.Match = "unknown: the claims did not verify"
	case len(failuresOf(r, verify.CheckOutput)) > 0:
		o.Match = "NO: this output is not the attested one"
		o.Attested = r.Claims.OutputDigest
	default:
		o.Match = "yes"
		o.Attested = r.Claims.OutputDigest
	}
	s, err := fhir.Summarize(out)
	if err != nil && !errors.Is(err, fhir.ErrNoProvenance) {
		o.Error = "not summarized: " + err.Error()
		return o
	}
	if err != nil {
		o.Error = "no ACDS Provenance names the source"
	}
	o.Source = s.Source
	o.Total = s.Total()
	for t, n := range s.Counts {
		o.Counts = append(o.Counts, kv{t, fmt.Sprint(n)})
	}
	sort.Slice(o.Counts, func(i, j int) bool { return o.Counts[i].K < o.Counts[j].K })
	o.Observations, o.More = latestObservations(out)
	return o
}

func joinNonEmpty(sep string, parts ...string) string {
	var keep []string
	for _, p := range parts {
		if p != "" {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, sep)
}
