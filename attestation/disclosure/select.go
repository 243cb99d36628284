package disclosure

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/acds-project/acds/attestation"
)

// ErrNotTogether: an output, its disclosure key and an attestation bundle
// do not belong together, so no disclosure made from them would verify.
var ErrNotTogether = errors.New("disclosure: the bundle, output and key do not belong together")

// CheckKey checks that the signed claims of bundle attest output and
// commit to its entries under key, so that a disclosure made from them
// verifies. It checks the claims' signature by the bundle's boot key, not
// the evidence: that is the recipient's verification. Failures that are
// not malformed input are ErrNotTogether.
func CheckKey(bundle, output, key []byte) error {
	b, err := attestation.ParseBundle(bundle)
	if err != nil {
		return err
	}
	pub, err := b.Boot.SigningPublicKey()
	if err != nil {
		return err
	}
	c, err := attestation.VerifyClaims(b.Statement, pub)
	if err != nil {
		return err
	}
	if d := attestation.Digest(output); d != c.OutputDigest {
		return fmt.Errorf("%w: the output is %s, the bundle attests %s", ErrNotTogether, d, c.OutputDigest)
	}
	if c.Entries == nil {
		return fmt.Errorf("%w: the bundle (version %d, format %s) commits to no entries: it cannot be disclosed from", ErrNotTogether, b.Version, c.OutputFormat)
	}
	com, err := Commit(key, output)
	if err != nil {
		return err
	}
	if !bytes.Equal(com.Root[:], c.Entries.Root) || com.Count != c.Entries.Count {
		return fmt.Errorf("%w: the disclosure key is not this output's: its commitment differs from the signed one", ErrNotTogether)
	}
	return nil
}

// ErrNoMatch: a selection names an entry the output does not hold, or
// matches none.
var ErrNoMatch = errors.New("disclosure: nothing to disclose")

// Select returns, in order, the indices of the entries of output whose
// resource is one of refs ("Type/id", as [Ref] gives) or, when match is
// not nil, makes match true; match gets each other entry's resource JSON.
// Every ref must name an entry, and something must be selected (else
// ErrNoMatch); an error of match is returned wrapped, naming the entry.
func Select(output []byte, refs []string, match func(resource []byte) (bool, error)) ([]int, error) {
	entries, err := Entries(output)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, r := range refs {
		want[r] = false
	}
	var idx []int
	for i, e := range entries {
		ref := Ref(e)
		if _, ok := want[ref]; ok {
			want[ref] = true
			idx = append(idx, i)
			continue
		}
		if match == nil {
			continue
		}
		var entry struct {
			Resource json.RawMessage `json:"resource"`
		}
		if err := json.Unmarshal(e, &entry); err != nil || len(entry.Resource) == 0 {
			continue
		}
		ok, err := match(entry.Resource)
		if err != nil {
			return nil, fmt.Errorf("entry %d (%s): %w", i, ref, err)
		}
		if ok {
			idx = append(idx, i)
		}
	}
	for _, r := range refs {
		if !want[r] {
			return nil, fmt.Errorf("%w: no entry of the output is %s", ErrNoMatch, r)
		}
	}
	if len(idx) == 0 {
		return nil, fmt.Errorf("%w: no entry matches", ErrNoMatch)
	}
	return idx, nil
}
