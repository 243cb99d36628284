package disclosure_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/acds-project/acds/attestation/disclosure"
)

var testKey = bytes.Repeat([]byte{7}, disclosure.KeySize)

// output returns a canonical-looking output Bundle of n entries whose
// strings hold quotes, backslashes, brackets and HTML.
func output(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"entry":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"fullUrl":"https://acds.invalid/fhir/Observation/o%d","resource":{"code":{"text":"a \"quoted\" [x] {y} \\\\ <b>&</b> %d"},"id":"o%d","resourceType":"Observation","status":"final","valueQuantity":{"unit":"%%","value":6.10}}}`, i, i, i)
	}
	b.WriteString(`],"resourceType":"Bundle","type":"collection"}`)
	return []byte(b.String())
}

// jsonEntries is the oracle for Entries: encoding/json's view of the
// top-level entry array.
func jsonEntries(t testing.TB, out []byte) []string {
	var v struct {
		Entry []json.RawMessage `json:"entry"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, e := range v.Entry {
		s = append(s, string(e))
	}
	return s
}

func TestEntriesMatchesEncodingJSON(t *testing.T) {
	for _, f := range []string{"testdata/record.json", "testdata/record-deidentified.json"} {
		out, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = bytes.TrimSpace(out)
		got, err := disclosure.Entries(out)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		want := jsonEntries(t, out)
		if len(got) != len(want) || len(got) != 3 {
			t.Fatalf("%s: %d entries, want %d (3)", f, len(got), len(want))
		}
		for i := range got {
			if string(got[i]) != want[i] {
				t.Errorf("%s: entry %d differs", f, i)
			}
		}
	}
	out := output(9)
	got, err := disclosure.Entries(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := jsonEntries(t, out); len(got) != 9 || string(got[8]) != want[8] {
		t.Fatalf("synthetic output: %d entries", len(got))
	}
}

func TestEntriesRejects(t *testing.T) {
	for _, in := range []string{
		``, `[]`, `{"entry":{}}`, `{"entry":[1]}`, `{"entry":[{}],"entry":[{}]}`, `{"entry":[{"a":1}}`,
		`{"entry":[{"a":"x}]}`, `{"entry":[{"a":1}]} `, `{"entry":[{"a":1}]}{}`, `{"a" :1}`, `{"entry":[{"a":[1,]}]}`,
		`{"entry":[{"a":{"b"}}]}`, `{"entry":[{"a":1,}]}`, strings.Repeat(`{"a":`, 200) + "1" + strings.Repeat("}", 200),
	} {
		if _, err := disclosure.Entries([]byte(in)); !errors.Is(err, disclosure.ErrMalformed) {
			t.Errorf("Entries(%.40q) = %v, want ErrMalformed", in, err)
		}
	}
	if e, err := disclosure.Entries([]byte(`{"resourceType":"Bundle"}`)); err != nil || len(e) != 0 {
		t.Errorf("Bundle without entries: %d, %v", len(e), err)
	}
}

// RFC 6962 tree heads of the Certificate Transparency reference leaves
// (trillian's testonly vectors), with an empty salt: the tree is exactly
// RFC 6962's.
func TestRFC6962Vectors(t *testing.T) {
	leaves := []string{"", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"}
	roots := []string{
		"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
		"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
		"aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
		"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
		"4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
		"76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
		"ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
		"5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
	}
	var data [][]byte
	for _, l := range leaves {
		b, _ := hex.DecodeString(l)
		data = append(data, b)
	}
	for n := 1; n <= len(data); n++ {
		got := disclosure.UnsaltedRootForTest(data[:n])
		if hex.EncodeToString(got[:]) != roots[n-1] {
			t.Errorf("root of %d leaves = %x, want %s", n, got, roots[n-1])
		}
	}
}

func commit(t testing.TB, out []byte) disclosure.Commitment {
	t.Helper()
	c, err := disclosure.Commit(testKey, out)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func disclose(t testing.TB, out []byte, idx ...int) *disclosure.Disclosure {
	t.Helper()
	d, err := disclosure.New([]byte("bundle"), testKey, out, idx)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// roundTrip writes and parses d, as a verifier receives it.
func roundTrip(t testing.TB, d *disclosure.Disclosure) *disclosure.Disclosure {
	t.Helper()
	b, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	p, err := disclosure.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAnySubsetVerifies(t *testing.T) {
	for n := 1; n <= 9; n++ {
		out := output(n)
		c := commit(t, out)
		for mask := 1; mask < 1<<n; mask++ {
			var idx []int
			for i := range n {
				if mask&(1<<i) != 0 {
					idx = append(idx, i)
				}
			}
			if err := disclosure.Check(roundTrip(t, disclose(t, out, idx...)), c); err != nil {
				t.Fatalf("%d entries, subset %v: %v", n, idx, err)
			}
		}
	}
}

func TestTamperingFailsPrecisely(t *testing.T) {
	out := output(6)
	c := commit(t, out)
	cases := []struct {
		name   string
		edit   func(d *disclosure.Disclosure)
		class  error
		reason string
	}{
		{"changed entry", func(d *disclosure.Disclosure) {
			d.Entries[1].Entry = bytes.Replace(d.Entries[1].Entry, []byte("6.10"), []byte("6.1"), 1)
		}, disclosure.ErrNotCommitted, "does not hash to the signed root"},
		{"wrong salt", func(d *disclosure.Disclosure) { d.Entries[0].Salt[0] ^= 1 }, disclosure.ErrNotCommitted, "does not hash"},
		{"entry at another index", func(d *disclosure.Disclosure) { d.Entries[0].Index, d.Entries[1].Index = 4, 5 }, disclosure.ErrNotCommitted, ""},
		{"contents swapped", func(d *disclosure.Disclosure) {
			d.Entries[0].Entry, d.Entries[1].Entry = d.Entries[1].Entry, d.Entries[0].Entry
		}, disclosure.ErrNotCommitted, ""},
		{"reordered", func(d *disclosure.Disclosure) { d.Entries[0], d.Entries[1] = d.Entries[1], d.Entries[0] }, disclosure.ErrOrder, "must be in output order"},
		{"duplicated", func(d *disclosure.Disclosure) { d.Entries = append(d.Entries[:2], d.Entries[1:]...) }, disclosure.ErrDuplicate, "disclosed twice"},
		{"added beyond the count", func(d *disclosure.Disclosure) {
			e := d.Entries[1]
			e.Index = 6
			d.Entries = append(d.Entries, e)
		}, disclosure.ErrOutOfRange, "beyond the 6 committed entries"},
		{"added in place of a hidden entry", func(d *disclosure.Disclosure) {
			e := d.Entries[1]
			e.Index = 3
			d.Entries = append(d.Entries[:2], e)
		}, disclosure.ErrNotCommitted, ""},
		{"proof cut", func(d *disclosure.Disclosure) { d.Entries[0].Proof = d.Entries[0].Proof[1:] }, disclosure.ErrNotCommitted, "does not fit"},
		{"count changed", func(d *disclosure.Disclosure) { d.EntryCount = 7 }, disclosure.ErrCount, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := disclose(t, out, 1, 2)
			if err := disclosure.Check(d, c); err != nil {
				t.Fatalf("untampered: %v", err)
			}
			tc.edit(d)
			err := disclosure.Check(roundTrip(t, d), c)
			if !errors.Is(err, tc.class) {
				t.Fatalf("err = %v, want %v", err, tc.class)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("err = %q, want it to say %q", err, tc.reason)
			}
		})
	}
}

// A hidden entry cannot be confirmed by guessing its content: the sibling
// hash a proof reveals is its salted leaf, which no salt the disclosure
// holds (nor none) reproduces, even from the exact content.
func TestHiddenEntryCannotBeConfirmed(t *testing.T) {
	out := output(2)
	entries, err := disclosure.Entries(out)
	if err != nil {
		t.Fatal(err)
	}
	d := roundTrip(t, disclose(t, out, 0))
	sibling := d.Entries[0].Proof[0] // the leaf of hidden entry 1
	guess := entries[1]              // the attacker guesses the content exactly
	var disclosed [disclosure.SaltSize]byte
	copy(disclosed[:], d.Entries[0].Salt)
	for name, salt := range map[string][disclosure.SaltSize]byte{"no salt": {}, "the disclosed salt": disclosed} {
		if l := disclosure.Leaf(salt, guess); bytes.Equal(l[:], sibling) {
			t.Errorf("%s confirms the hidden entry", name)
		}
	}
	unsalted := sha256.Sum256(append([]byte{0}, guess...))
	if bytes.Equal(unsalted[:], sibling) {
		t.Error("the unsalted RFC 6962 leaf confirms the hidden entry")
	}
	// Only its own salt, which the key holder never disclosed, does.
	if l := disclosure.Leaf(disclosure.Salt(testKey, 1), guess); !bytes.Equal(l[:], sibling) {
		t.Error("the hidden entry's own salt does not give its leaf: the test proves nothing")
	}
}

func TestDeidentifiedOutput(t *testing.T) {
	out, err := os.ReadFile("testdata/record-deidentified.json")
	if err != nil {
		t.Fatal(err)
	}
	out = bytes.TrimSpace(out)
	if err := disclosure.Check(roundTrip(t, disclose(t, out, 1)), commit(t, out)); err != nil {
		t.Fatal(err)
	}
}

// A disclosure re-encoded by other tools (indented, HTML escaped) still
// verifies: the committed bytes are recovered from each entry.
func TestReformattedDisclosureVerifies(t *testing.T) {
	out := output(4)
	d := disclose(t, out, 2)
	b, err := json.MarshalIndent(d, "", "\t") // escapes < > & in entries
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`\u003cb\u003e`)) {
		t.Fatal("re-encoding kept the entry's bytes: the test proves nothing")
	}
	p, err := disclosure.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := disclosure.Check(p, commit(t, out)); err != nil {
		t.Fatal(err)
	}
}

func TestParseRejects(t *testing.T) {
	good, err := disclose(t, output(3), 1).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(string) string{
		"unknown member": func(s string) string { return strings.Replace(s, `"version"`, `"extra":1,"version"`, 1) },
		"wrong type":     func(s string) string { return strings.Replace(s, disclosure.Type, "other", 1) },
		"version 2":      func(s string) string { return strings.Replace(s, `"version": 1`, `"version": 2`, 1) },
		"trailing":       func(s string) string { return s + "{}" },
		"no entries":     func(s string) string { return s[:strings.Index(s, `"entries"`)] + `"entries":[]}` },
		"short salt": func(s string) string {
			i := strings.Index(s, `"salt": "`) + len(`"salt": "`)
			return s[:i] + "AAAA" + s[i+strings.IndexByte(s[i:], '"'):]
		},
		"entry not an object": func(s string) string {
			i := strings.Index(s, `"entry": {`) + len(`"entry": `)
			j := strings.LastIndex(s, "}\n    }")
			return s[:i] + "[1]" + s[j+1:]
		},
	} {
		if _, err := disclosure.Parse([]byte(edit(string(good)))); !errors.Is(err, disclosure.ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
	if _, err := disclosure.Parse(make([]byte, disclosure.MaxSize+1)); !errors.Is(err, disclosure.ErrTooLarge) {
		t.Errorf("oversized: %v", err)
	}
}

func TestNewRejects(t *testing.T) {
	out := output(3)
	if _, err := disclosure.New(nil, testKey, out, []int{3}); !errors.Is(err, disclosure.ErrOutOfRange) {
		t.Errorf("index 3 of 3: %v", err)
	}
	if _, err := disclosure.New(nil, testKey, out, []int{1, 1}); !errors.Is(err, disclosure.ErrDuplicate) {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := disclosure.New(nil, testKey[:5], out, []int{1}); !errors.Is(err, disclosure.ErrKey) {
		t.Errorf("short key: %v", err)
	}
}
