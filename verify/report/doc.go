// Package report renders one verification of an ACDS attestation bundle as
// a self-contained HTML page (DESIGN §10): `acds verify BUNDLE --html FILE`
// writes it offline and `GET /verify` on `acds serve` shows it in the
// browser, from the same code.
//
//	res, err := v.VerifyOutput(bundle, output) // or v.Verify(bundle)
//	page, err := report.Render(report.Input{Result: res, Bundle: bundle, Output: output, Verifier: v})
//	os.WriteFile("report.html", page, 0o644)
//
// The page renders a verification; it decides nothing. Its verdict and its
// booleans are those of [verify.Result.Response], the object POST
// /v1/verify and `acds verify --json` print (the page shows that object
// too), so the three never disagree. Beyond that object it shows what the
// bundle carries and the verifier looked at: every check with pass, fail,
// "does not apply" or "not reached" and its reasons; the evidence chain
// (vendor root → … → report → boot key → claims → output); the measurement
// next to the code hashes the policy allows; each notary statement (portal
// host, dialled address, TLS version and suite, the certificate's subject
// and its chain's digest, time, byte counts); the signed claims; and, for
// an output, its resources by type (fhir.Summarize) and the patient's
// latest observation of each code; for a disclosure (Input.Disclosure,
// from verify.VerifyDisclosure), the disclosure check and the entries it
// shows, which `acds verify --disclosure FILE --html PAGE` and a
// disclosure uploaded to `POST /verify` render. A statement names the server
// certificate by the subject and name the notary verified and the digest
// of its chain; the certificate itself is not in the bundle.
//
// # A page that cannot be turned against its reader
//
// Everything in a bundle or an output is attacker-controlled. The page is
// built with html/template, which escapes every value for its context, and
// carries a strict Content-Security-Policy ([CSP]): default-src 'none',
// the one inline style allowed by its SHA-256 hash, no script at all, no
// image, font, frame or connection, forms posting only to the page's own
// origin. The document loads nothing: no URL outside it is referenced, so
// a saved report opens the same offline.
//
// The upload form of the server's page ([Input.Upload]) is a plain
// multipart form, not a script calling POST /v1/verify: without script
// there is nothing to inject into, the page works with JavaScript off, and
// the server answers the form with a page rendered from the verification
// itself (so with the evidence chain and the notary statements, which the
// JSON object does not carry). A file can be dropped onto the file field.
//
// Package report is on the verifier's side of the house: like package
// verify it imports no net/http, server, client or store.
package report
