package r4_test

import (
	"bytes"
	"sync"
	"testing"

	"github.com/acds-project/acds/fhir/r4"
)

// TestConcurrentUse decodes, walks and encodes distinct values from several
// goroutines at once; run under -race it shows the package shares no mutable
// state.
func TestConcurrentUse(t *testing.T) {
	inputs := [][]byte{[]byte(walkBundle), []byte(`{"resourceType":"Patient","name":[{"given":["a",null],"_given":[null,{"id":"x"}]}]}`)}
	want := make([][]byte, len(inputs))
	for i, in := range inputs {
		r, err := r4.Unmarshal(in)
		if err != nil {
			t.Fatal(err)
		}
		if want[i], err = r4.Marshal(r); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 8 {
		wg.Go(func() {
			for n := range 50 {
				i := (g + n) % len(inputs)
				r, err := r4.Unmarshal(inputs[i])
				if err != nil {
					errs <- err.Error()
					return
				}
				_ = r4.Walk(r, func(*r4.Path, any) error { return nil })
				out, err := r4.Marshal(r)
				if err != nil || !bytes.Equal(out, want[i]) {
					errs <- "different output"
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}
