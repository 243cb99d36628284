package disclosure

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/acds-project/acds"
)

// Type is the value of a disclosure's "type" member.
const Type = "acds-disclosure"

// Version is the disclosure format version this package writes and reads.
const Version = 1

// Limits for untrusted disclosures.
const (
	// MaxSize bounds a disclosure's JSON (the server's verify body limit).
	MaxSize = 32 << 20
	// MaxDisclosed bounds the entries one disclosure shows.
	MaxDisclosed = 10000
	// maxProof is the longest audit path of a tree of MaxEntries leaves.
	maxProof = 24
)

// Disclosure is a set of entries of one attested output with what proves
// them: their salts and RFC 6962 audit paths, and the attestation bundle
// whose signed claims carry the root. Its JSON form is what `acds
// disclose` writes and POST /v1/verify accepts as "disclosure".
type Disclosure struct {
	// Type is always [Type]; Version always [Version].
	Type    string `json:"type"`
	Version int    `json:"version"`
	// AttestationBundle is the bundle, base64 (std).
	AttestationBundle string `json:"attestationBundle"`
	// EntryCount is the number of entries of the output (the tree size);
	// it must equal the signed commitment's.
	EntryCount int `json:"entryCount"`
	// Entries are the disclosed entries in increasing Index order.
	Entries []Entry `json:"entries"`
}

// Entry is one disclosed entry.
type Entry struct {
	// Index is the entry's position in the output Bundle (0-based).
	Index int `json:"index"`
	// Salt is the entry's salt (32 bytes, base64 std in JSON).
	Salt []byte `json:"salt"`
	// Proof is the audit path from the entry's leaf to the root, leaf side
	// first (32-byte hashes, base64 std in JSON).
	Proof [][]byte `json:"proof"`
	// Entry is the Bundle entry object ({"fullUrl":…,"resource":…}) as in
	// the output; a pretty-printed or re-escaped copy is accepted, since
	// acds.OutputBytes recovers the committed bytes from it.
	Entry json.RawMessage `json:"entry"`
}

// New returns the disclosure of the entries of output at indices (any
// order, no duplicates) under key, with bundle (the attestation bundle's
// CBOR bytes). output must be the attested output's canonical bytes.
func New(bundle, key, output []byte, indices []int) (*Disclosure, error) {
	entries, err := Entries(output)
	if err != nil {
		return nil, err
	}
	ls, err := leaves(key, entries)
	if err != nil {
		return nil, err
	}
	picked := make([]bool, len(entries))
	for _, i := range indices {
		if i < 0 || i >= len(entries) {
			return nil, fmt.Errorf("%w: index %d of %d entries", ErrOutOfRange, i, len(entries))
		}
		if picked[i] {
			return nil, fmt.Errorf("%w: index %d", ErrDuplicate, i)
		}
		picked[i] = true
	}
	d := &Disclosure{Type: Type, Version: Version, AttestationBundle: base64.StdEncoding.EncodeToString(bundle), EntryCount: len(entries), Entries: []Entry{}}
	for i, ok := range picked {
		if !ok {
			continue
		}
		e := Entry{Index: i, Salt: saltBytes(key, i), Entry: json.RawMessage(entries[i]), Proof: [][]byte{}}
		for _, h := range path(i, ls) {
			e.Proof = append(e.Proof, append([]byte(nil), h[:]...))
		}
		d.Entries = append(d.Entries, e)
	}
	return d, nil
}

// Marshal returns the disclosure as indented JSON, except that each entry
// is written on one line in its committed (canonical) form, which Parse
// then takes as it is instead of re-encoding it. Nothing is HTML-escaped.
func (d *Disclosure) Marshal() ([]byte, error) {
	// The entries go in as placeholders, replaced after indenting.
	c := *d
	c.Entries = make([]Entry, len(d.Entries))
	compact := make([][]byte, len(d.Entries))
	for i, e := range d.Entries {
		raw := []byte(e.Entry)
		if len(raw) == 0 || !json.Valid(raw) {
			return nil, fmt.Errorf("encoding disclosure: entry %d is not JSON", i)
		}
		if !canonical(raw) {
			var err error
			if raw, err = acds.OutputBytes(raw); err != nil {
				return nil, fmt.Errorf("encoding disclosure: entry %d: %w", i, err)
			}
		}
		compact[i] = raw
		c.Entries[i] = e
		c.Entries[i].Entry = json.RawMessage(fmt.Sprintf(`"\u0000entry %d"`, i))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(&c); err != nil {
		return nil, fmt.Errorf("encoding disclosure: %w", err)
	}
	// The placeholders come in order; nothing else may hold a NUL.
	indented := buf.Bytes()
	if bytes.Count(indented, []byte(`\u0000`)) != len(compact) {
		return nil, fmt.Errorf("encoding disclosure: a member holds a NUL character")
	}
	out := make([]byte, 0, len(indented)+entriesLen(compact))
	for i, raw := range compact {
		ph := []byte(fmt.Sprintf(`"\u0000entry %d"`, i))
		j := bytes.Index(indented, ph)
		if j < 0 {
			return nil, fmt.Errorf("encoding disclosure: entry %d lost", i)
		}
		out = append(append(out, indented[:j]...), raw...)
		indented = indented[j+len(ph):]
	}
	return append(out, indented...), nil
}

func entriesLen(entries [][]byte) int {
	n := 0
	for _, e := range entries {
		n += len(e)
	}
	return n
}

// Parse decodes a disclosure strictly: at most MaxSize bytes, no unknown
// members, the right type and version, well-formed salts, proofs and
// entries. It checks no hash: see [Check].
func Parse(data []byte) (*Disclosure, error) {
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(data), MaxSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var d Disclosure
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the disclosure", ErrMalformed)
	}
	switch {
	case d.Type != Type:
		return nil, fmt.Errorf("%w: type %q, want %q", ErrMalformed, d.Type, Type)
	case d.Version != Version:
		return nil, fmt.Errorf("%w: unsupported version %d, want %d", ErrMalformed, d.Version, Version)
	case d.AttestationBundle == "":
		return nil, fmt.Errorf("%w: attestationBundle missing", ErrMalformed)
	case d.EntryCount < 1 || d.EntryCount > MaxEntries:
		return nil, fmt.Errorf("%w: entryCount %d, want 1 to %d", ErrMalformed, d.EntryCount, MaxEntries)
	case len(d.Entries) == 0:
		return nil, fmt.Errorf("%w: no entries disclosed", ErrMalformed)
	case len(d.Entries) > MaxDisclosed:
		return nil, fmt.Errorf("%w: %d entries, at most %d", ErrTooLarge, len(d.Entries), MaxDisclosed)
	}
	for pos := range d.Entries {
		e := &d.Entries[pos]
		bad := func(reason string) error {
			return &EntryError{Position: pos, Index: e.Index, Reason: reason, Err: ErrMalformed}
		}
		if len(e.Salt) != SaltSize {
			return nil, bad(fmt.Sprintf("salt of %d bytes, want %d", len(e.Salt), SaltSize))
		}
		if len(e.Proof) > maxProof {
			return nil, bad(fmt.Sprintf("proof of %d hashes, at most %d", len(e.Proof), maxProof))
		}
		for _, h := range e.Proof {
			if len(h) != HashSize {
				return nil, bad(fmt.Sprintf("proof hash of %d bytes, want %d", len(h), HashSize))
			}
		}
		if len(e.Entry) > 0 && e.Entry[0] == '{' && canonical(e.Entry) {
			continue // already the committed form (Marshal writes entries so)
		}
		c, err := acds.OutputBytes(e.Entry)
		if err != nil || len(c) == 0 || c[0] != '{' {
			return nil, bad("entry is not a JSON object")
		}
		e.Entry = c
	}
	return &d, nil
}

// Bundle returns the attestation bundle's bytes (the base64 decoded).
func (d *Disclosure) Bundle() ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(d.AttestationBundle)
	if err != nil {
		return nil, fmt.Errorf("%w: attestationBundle is not base64", ErrMalformed)
	}
	return b, nil
}

// Check verifies every disclosed entry of d against c, the commitment the
// caller took from claims whose signature it verified: entries in strictly
// increasing index order, each index within the committed count, and each
// entry's salted leaf with its proof leading to c.Root. It returns the
// first failure as an *EntryError (or ErrCount). It does not verify the
// attestation bundle: package verify does, then calls Check.
func Check(d *Disclosure, c Commitment) error {
	if d.EntryCount != c.Count {
		return fmt.Errorf("%w: the disclosure says %d entries, the signed claims %d", ErrCount, d.EntryCount, c.Count)
	}
	prev := -1
	for pos, e := range d.Entries {
		fail := func(class error, reason string) error {
			return &EntryError{Position: pos, Index: e.Index, Ref: Ref(e.Entry), Reason: reason, Err: class}
		}
		switch {
		case e.Index < 0 || e.Index >= c.Count:
			return fail(ErrOutOfRange, fmt.Sprintf("index beyond the %d committed entries", c.Count))
		case e.Index == prev:
			return fail(ErrDuplicate, "this entry is disclosed twice")
		case e.Index < prev:
			return fail(ErrOrder, fmt.Sprintf("index %d after index %d: entries must be in output order", e.Index, prev))
		}
		prev = e.Index
		if len(e.Salt) != SaltSize {
			return fail(ErrMalformed, "salt has the wrong size")
		}
		var salt [SaltSize]byte
		copy(salt[:], e.Salt)
		p := make([][HashSize]byte, len(e.Proof))
		for i, h := range e.Proof {
			if len(h) != HashSize {
				return fail(ErrMalformed, "proof hash has the wrong size")
			}
			copy(p[i][:], h)
		}
		r, ok := rootFromPath(e.Index, c.Count, Leaf(salt, e.Entry), p)
		if !ok {
			return fail(ErrNotCommitted, fmt.Sprintf("proof of %d hashes does not fit index %d of %d entries", len(p), e.Index, c.Count))
		}
		if r != c.Root {
			return fail(ErrNotCommitted, "content, salt or proof does not hash to the signed root (a changed entry, a wrong salt, or an entry at another position)")
		}
	}
	return nil
}

// Ref returns "Type/id" of an entry's resource, or "" when it has none.
// It is a label for messages, not a check: on the compact JSON that Parse
// and New leave in entries it reads the two members it needs without
// decoding the rest (the verifier labels every disclosed entry, and a
// full decode cost as much as the rest of the verification); other bytes
// are decoded with encoding/json, and give "" when they are not JSON.
func Ref(entry []byte) string {
	if ref, ok := refCompact(entry); ok {
		return ref
	}
	return refDecoded(entry)
}

// refDecoded is Ref by encoding/json.
func refDecoded(entry []byte) string {
	var e struct {
		Resource struct {
			ResourceType string `json:"resourceType"`
			ID           string `json:"id"`
		} `json:"resource"`
	}
	if json.Unmarshal(entry, &e) != nil || e.Resource.ResourceType == "" {
		return ""
	}
	if e.Resource.ID == "" {
		return e.Resource.ResourceType
	}
	return e.Resource.ResourceType + "/" + e.Resource.ID
}

// refCompact is Ref for compact JSON whose resource's "resourceType" and
// "id" are strings without escapes, with member names as written; ok is
// false for anything else (escapes, invalid UTF-8, names that differ in
// case only, which encoding/json would match), which Ref then decodes.
func refCompact(entry []byte) (ref string, ok bool) {
	s := scanner{b: entry}
	if !s.next('{') || s.next('}') {
		return "", false
	}
	for {
		key, ok := s.str()
		if !ok || !s.next(':') {
			return "", false
		}
		if string(key) == `"resource"` {
			break
		}
		if bytes.EqualFold(key, []byte(`"resource"`)) {
			return "", false // encoding/json matches names without case
		}
		if !s.value() || !s.next(',') {
			return "", false // malformed, or no resource: let Ref decode
		}
	}
	if !s.next('{') || s.next('}') {
		return "", false
	}
	var typ, id []byte
	for {
		key, ok := s.str()
		if !ok || !s.next(':') {
			return "", false
		}
		switch string(key) {
		case `"resourceType"`, `"id"`:
			v, ok := s.str()
			if !ok || bytes.IndexByte(v, '\\') >= 0 || !utf8.Valid(v) {
				return "", false
			}
			if string(key) == `"id"` {
				id = v[1 : len(v)-1]
			} else {
				typ = v[1 : len(v)-1]
			}
		default:
			if bytes.EqualFold(key, []byte(`"resourceType"`)) || bytes.EqualFold(key, []byte(`"id"`)) || !s.value() {
				return "", false
			}
		}
		if s.next(',') {
			continue
		}
		if !s.next('}') {
			return "", false
		}
		break
	}
	// A second "resource" would merge into the first in encoding/json.
	for s.next(',') {
		key, ok := s.str()
		if !ok || !s.next(':') || bytes.EqualFold(key, []byte(`"resource"`)) || !s.value() {
			return "", false
		}
	}
	if !s.next('}') || s.i != len(s.b) {
		return "", false
	}
	switch {
	case len(typ) == 0:
		return "", true
	case len(id) == 0:
		return string(typ), true
	}
	return string(typ) + "/" + string(id), true
}
