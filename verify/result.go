package verify

import (
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
)

// Check names one verification step.
type Check string

// The checks, in the order Verify runs them.
const (
	CheckProfile     Check = "profile"     // the profile is supported and allowed
	CheckSignature   Check = "signature"   // the boot key signed the claims
	CheckEvidence    Check = "evidence"    // vendor chain, report signature, debug, TCB
	CheckBinding     Check = "binding"     // report data binds the boot keys and nonce
	CheckMeasurement Check = "measurement" // the measurement is allowed and matches the claims
	CheckNotary      Check = "mpc-tls"     // notary statements
	CheckTime        Check = "time"        // issue time plausible and within MaxAge
	CheckManifest    Check = "manifest"    // manifest valid at the clock
	CheckOutput      Check = "output"      // output digest (VerifyOutput only)
	CheckStructure   Check = "structure"   // bundle consistency (e.g. statements without sessions)
)

// Error classes of failures; every Failure.Err wraps one.
var (
	ErrSimulation      = errors.New("simulated evidence is not allowed by the policy")
	ErrUnsupported     = errors.New("profile not supported in this build")
	ErrSignature       = errors.New("claims signature does not verify")
	ErrEvidence        = errors.New("TEE evidence does not verify")
	ErrBinding         = errors.New("evidence does not bind the boot keys")
	ErrMeasurement     = errors.New("measurement not allowed")
	ErrNotary          = errors.New("mpc-tls statement not verified")
	ErrTime            = errors.New("issue time outside the allowed window")
	ErrManifest        = errors.New("manifest not valid now")
	ErrOutputDigest    = errors.New("output digest does not match the attested digest")
	ErrInconsistent    = errors.New("bundle is inconsistent")
	ErrNoReferenceHash = errors.New("policy lists no measurement for this profile")
)

// Failure is one failed check.
type Failure struct {
	Check Check
	Err   error
}

func (f *Failure) Error() string { return fmt.Sprintf("%s: %v", f.Check, f.Err) }

// Unwrap returns the underlying error.
func (f *Failure) Unwrap() error { return f.Err }

// Result is the outcome of verifying one bundle.
type Result struct {
	// Valid is true only when every check that applies passed.
	Valid bool
	// EnclaveHashMatch: the authenticated measurement is allowed for the
	// profile and equals the claims' measurement.
	EnclaveHashMatch bool
	// MPCTLSVerified: every notary statement of an mpc-tls source
	// verified. Always false for raw sources, where it does not apply.
	MPCTLSVerified bool
	// TEEQuoteVerified: the evidence verified under the policy, binds the
	// boot keys, and the boot key signed the claims.
	TEEQuoteVerified bool

	// Profile of the bundle.
	Profile string
	// Measurement reported by the evidence (authenticated only when
	// TEEQuoteVerified).
	Measurement []byte
	// Claims are the signed claims; nil when the signature did not verify.
	Claims *attestation.Claims
	// CertificatesValidNow reports whether the evidence's certificates are
	// also valid at the verifier's clock (they are checked at the issue
	// time). It does not affect Valid.
	CertificatesValidNow bool
	// OutputChecked is true when VerifyOutput compared the output digest.
	OutputChecked bool
	// Boot is the bundle's boot evidence (the bound keys).
	Boot *attestation.BootEvidence
	// VerifiedAt is the verifier's clock.
	VerifiedAt time.Time

	// Failures lists every failed check.
	Failures []*Failure
	// Relaxations lists every weakening of the policy that applied.
	Relaxations []string

	// BundleVersion is the bundle's format version.
	BundleVersion int
	// DisclosureChecked is true when VerifyDisclosure checked entries.
	DisclosureChecked bool
	// Disclosed lists the entries a verified disclosure shows, in output
	// order; empty unless every one verified.
	Disclosed []acds.DisclosedEntry
}

func (r *Result) fail(c Check, err error) {
	r.Failures = append(r.Failures, &Failure{Check: c, Err: err})
}

// Err returns nil when Valid, else all failures joined (errors.Is works
// with the Err* values).
func (r *Result) Err() error {
	if r.Valid {
		return nil
	}
	errs := make([]error, 0, len(r.Failures))
	for _, f := range r.Failures {
		errs = append(errs, f)
	}
	if len(errs) == 0 {
		return errors.New("bundle not valid")
	}
	return errors.Join(errs...)
}

// NoteCertificatesExpired is the reason Reasons adds when the evidence's
// certificates were valid when the claims were issued but are not valid at
// the verifier's clock. It does not make a bundle invalid.
const NoteCertificatesExpired = "note: the evidence's certificates were valid at the issue time but are not valid now"

// NoteNoCoverage is the reason Reasons adds for a fetched output whose
// claims do not record its coverage (bundles made before coverage was
// signed). It does not make a bundle invalid.
const NoteNoCoverage = "note: no coverage recorded: the claims do not say what the fetched record was assembled from"

// Reasons lists every failed check and every relaxation, as the
// /v1/verify details report them, then NoteNoCoverage and
// NoteCertificatesExpired when they apply.
func (r *Result) Reasons() []string {
	if r == nil {
		return nil
	}
	out := make([]string, 0, len(r.Failures)+len(r.Relaxations))
	for _, f := range r.Failures {
		out = append(out, f.Error())
	}
	for _, x := range r.Relaxations {
		out = append(out, "relaxation: "+x)
	}
	if c := r.Claims; c != nil && c.Source.Kind == acds.SourceMPCTLS && c.Coverage == nil {
		out = append(out, NoteNoCoverage)
	}
	if r.TEEQuoteVerified && !r.CertificatesValidNow {
		out = append(out, NoteCertificatesExpired)
	}
	return out
}

// Response returns the POST /v1/verify response object for r.
func (r *Result) Response() acds.VerifyResponse {
	d := acds.VerifyDetails{Profile: r.Profile, Measurement: hex.EncodeToString(r.Measurement), Reasons: r.Reasons()}
	if c := r.Claims; c != nil {
		d.IssuedAt = c.IssuedAt
		d.RequestID = c.RequestID
		d.OutputDigest = c.OutputDigest
		d.Source = c.Source.Kind
		if len(c.Source.Sessions) > 0 {
			d.PortalHost = c.Source.Sessions[0].Host
		}
		d.Coverage = c.Coverage
	}
	r.extendDetails(&d)
	return acds.VerifyResponse{
		Valid:            r.Valid,
		EnclaveHashMatch: r.EnclaveHashMatch,
		MPCTLSVerified:   r.MPCTLSVerified,
		TEEQuoteVerified: r.TEEQuoteVerified,
		Details:          d,
	}
}

// CoverageSummary says in one line what the claims say a fetched record
// was assembled from: "$everything" or the compartment's searches, the
// number of requests and entries, and how many compartment types the
// portal does not search; "no coverage recorded" when the claims do not
// say, and "" for a raw submission or claims that did not verify.
func (r *Result) CoverageSummary() string {
	c := r.Claims
	if c == nil || c.Source.Kind != acds.SourceMPCTLS {
		return ""
	}
	cov := c.Coverage
	if cov == nil {
		return "no coverage recorded"
	}
	how := "Patient/$everything"
	if !cov.Everything {
		how = "searches of the Patient compartment"
	}
	if cov.CapabilityStatement {
		how += ", as the portal's CapabilityStatement advertised"
	} else {
		how += " (the portal published no CapabilityStatement)"
	}
	entries := 0
	for _, q := range cov.Requests {
		entries += q.Entries
	}
	s := fmt.Sprintf("%s: %d requests, %d entries", how, len(cov.Requests), entries)
	if n := len(cov.Unsupported); n > 0 {
		s += fmt.Sprintf("; %d compartment types not searchable there", n)
	}
	return s
}
