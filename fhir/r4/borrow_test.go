package r4_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/internal/testrig/corpus"
)

// decodeOutcome is what a decoding gave, to compare two decodings.
func decodeOutcome(opts r4.Options, data []byte) (r4.Resource, string) {
	r, errs := opts.Decode(data)
	return r, fmt.Sprint(errs)
}

// A borrowing decoder (Options.Borrow) decodes every input to the same
// model with the same errors as one that copies, and stops at the same
// inputs under a model memory limit: the corpus's Synthea, Inferno and HL7
// validator inputs, and strings with escapes.
func TestBorrowDecodesAlike(t *testing.T) {
	files := corpus.JSON(t, corpus.Synthea, corpus.Inferno, corpus.ValidatorCases)
	inputs := map[string][]byte{
		"escapes": []byte(`{"resourceType":"Patient","id":"e","name":[{"family":"O\u0027Brien \"Jr\"","given":["Zoë","\ud83d\ude00"]}]}`),
		"broken":  []byte(`{"resourceType":"Patient","id":"b","gender":"female","name":[{"family":12}],"birthDate":"1970-13-01"}`),
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inputs[filepath.Base(f)] = data
	}
	stopped := 0
	for name, data := range inputs {
		for _, limit := range []int{0, len(data) / 2, len(data), 2 * len(data), 4 * len(data)} {
			copied, cerr := decodeOutcome(r4.Options{MaxModelBytes: limit}, data)
			borrowed, berr := decodeOutcome(r4.Options{MaxModelBytes: limit, Borrow: true}, data)
			if cerr != berr {
				t.Fatalf("%s, model limit %d: copying gave %s, borrowing %s", name, limit, cerr, berr)
			}
			if !reflect.DeepEqual(copied, borrowed) {
				t.Fatalf("%s, model limit %d: the models differ", name, limit)
			}
			if _, errs := (r4.Options{MaxModelBytes: limit}).Decode(data); len(errs) > 0 && errors.Is(errs[len(errs)-1], r4.ErrLimit) {
				stopped++
			}
		}
	}
	if stopped == 0 {
		t.Fatal("no model limit stopped a decoding: the limits compared nothing")
	}
	t.Logf("%d inputs, %d decodings stopped by the model limit", len(inputs), stopped)
}

// Borrowed strings are the input's bytes (which is why the input must not
// change while the model is in use), except decoded escapes; copied ones
// are not.
func TestBorrowSharesInput(t *testing.T) {
	in := `{"resourceType":"Patient","id":"abc","gender":"female","name":[{"family":"O\u0027Brien"}]}`
	for _, borrow := range []bool{false, true} {
		data := []byte(in)
		r, errs := r4.Options{Borrow: borrow}.Decode(data)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		p := r.(*r4.Patient)
		copy(data[len(`{"resourceType":"Patient","id":"abc","gender":"`):], "FEMALE")
		for i := range data {
			if data[i] == 'O' {
				data[i] = 'X' // the family name's first byte, in the input
			}
		}
		if got, want := p.Gender.Text(), map[bool]string{false: "female", true: "FEMALE"}[borrow]; got != want {
			t.Errorf("borrow %v: gender %q after the input changed, want %q", borrow, got, want)
		}
		if got := p.Name[0].Family.Text(); got != "O'Brien" {
			t.Errorf("borrow %v: family %q after the input changed, want the decoded escape kept", borrow, got)
		}
	}
}
