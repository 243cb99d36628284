package verify

import (
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/disclosure"
)

// CheckDisclosure is the check that a disclosure's entries are under the
// signed commitment (VerifyDisclosure only).
const CheckDisclosure Check = "disclosure"

// ErrDisclosure is the class of a disclosure that does not verify: an
// entry changed, added, duplicated, out of order or with a wrong salt or
// proof, or claims that commit to no entries. The Failure's error also
// wraps the disclosure package's class (disclosure.ErrNotCommitted, …).
var ErrDisclosure = errors.New("disclosure does not verify")

// VerifyDisclosure checks a disclosure (its JSON, as `acds disclose`
// writes it): the attestation bundle it carries exactly as Verify does,
// then that every disclosed entry, with its salt and audit path, leads to
// the entry commitment in the signed claims. Result.Disclosed lists the
// entries shown; Valid is true only when the bundle is valid and every
// entry verified. It says nothing about the entries not shown.
//
// The error is non-nil only when the bytes are not a disclosure or its
// bundle is not a bundle (wrapping disclosure.ErrMalformed or
// attestation.ErrMalformed, …).
func (v *Verifier) VerifyDisclosure(data []byte) (*Result, error) {
	d, err := disclosure.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("not a disclosure: %w", err)
	}
	bundle, err := d.Bundle()
	if err != nil {
		return nil, fmt.Errorf("not a disclosure: %w", err)
	}
	r, err := v.verify(bundle, nil)
	if err != nil {
		return nil, err
	}
	r.DisclosureChecked = true
	c := r.Claims
	switch {
	case c == nil:
		// The signature failed: nothing to check the entries against.
		r.fail(CheckDisclosure, fmt.Errorf("%w: the claims did not verify", ErrDisclosure))
	case c.Entries == nil:
		r.fail(CheckDisclosure, fmt.Errorf("%w: the signed claims commit to no entries (a version %d bundle, or output format %s)", ErrDisclosure, r.BundleVersion, c.OutputFormat))
	default:
		com := disclosure.Commitment{Count: c.Entries.Count}
		copy(com.Root[:], c.Entries.Root)
		if err := disclosure.Check(d, com); err != nil {
			r.fail(CheckDisclosure, fmt.Errorf("%w: %w", ErrDisclosure, err))
		} else {
			for _, e := range d.Entries {
				r.Disclosed = append(r.Disclosed, acds.DisclosedEntry{Index: e.Index, Ref: disclosure.Ref(e.Entry)})
			}
		}
	}
	r.Valid = r.Valid && len(r.Failures) == 0
	return r, nil
}

// checkVersion fails a version 1 bundle whose claims carry what only
// version 2 defines: no enclave ever signed such a bundle.
func checkVersion(b *attestation.Bundle, c *attestation.Claims, r *Result) {
	r.BundleVersion = b.Version
	if c != nil && b.Version < 2 && (c.Entries != nil || c.Query != nil || c.Coverage != nil) {
		r.fail(CheckStructure, fmt.Errorf("%w: version %d bundle with claims of version 2", ErrInconsistent, b.Version))
	}
}

// extendDetails adds the extension details of version 2 claims.
func (r *Result) extendDetails(d *acds.VerifyDetails) {
	d.BundleVersion = r.BundleVersion
	if c := r.Claims; c != nil {
		if e := c.Entries; e != nil {
			d.Entries = &acds.VerifyEntries{Count: e.Count, Root: hex.EncodeToString(e.Root)}
		}
		if q := c.Query; q != nil {
			d.Query = &acds.VerifyQuery{Expression: q.Expression, RecordDigest: q.RecordDigest}
		}
	}
	d.Disclosed = r.Disclosed
}
