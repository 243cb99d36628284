package fhir

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// bundleReuseCases are Bundles whose rules fill every table of a
// bundleCtx: fullUrls with and without resources, repeated fullUrls,
// versions, type/id matches, references resolved and not, and a Bundle
// inside a Bundle.
var bundleReuseCases = []string{
	// A urn:uuid reference to the fullUrl of an entry without a resource
	// (a DELETE) resolves in the Bundle; one to no entry does not.
	`{"resourceType":"Bundle","type":"transaction","entry":[
	 {"fullUrl":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b1","request":{"method":"DELETE","url":"Medication/m"}},
	 {"fullUrl":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b2","resource":{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b1"},"focus":[{"reference":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b9"}]},"request":{"method":"POST","url":"Observation"}}]}`,
	// A fullUrl held by an entry with a resource and by one without keeps
	// the resource's type, in either order: the subject's target type is
	// checked against Medication.
	`{"resourceType":"Bundle","type":"transaction","entry":[
	 {"fullUrl":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b1","resource":{"resourceType":"Medication"},"request":{"method":"POST","url":"Medication"}},
	 {"fullUrl":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b1","request":{"method":"DELETE","url":"Medication/m"}},
	 {"fullUrl":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b2","resource":{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b1"}},"request":{"method":"POST","url":"Observation"}}]}`,
	`{"resourceType":"Bundle","type":"transaction","entry":[
	 {"fullUrl":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b1","request":{"method":"DELETE","url":"Medication/m"}},
	 {"fullUrl":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b1","resource":{"resourceType":"Medication"},"request":{"method":"POST","url":"Medication"}},
	 {"fullUrl":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b2","resource":{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b1"}},"request":{"method":"POST","url":"Observation"}}]}`,
	// Repeated fullUrls (bdl-7) unless their versions differ, repeated
	// ids, and document references by type and id.
	`{"resourceType":"Bundle","type":"document","identifier":{"system":"http://x.org","value":"1"},"timestamp":"2024-01-01T00:00:00Z","entry":[
	 {"fullUrl":"http://x.org/Composition/c","resource":{"resourceType":"Composition","id":"c","status":"final","type":{"text":"t"},"date":"2024-01-01","author":[{"reference":"Patient/p"}],"title":"t","subject":{"reference":"Patient/q"}}},
	 {"fullUrl":"http://x.org/Patient/p","resource":{"resourceType":"Patient","id":"p","meta":{"versionId":"1"}}},
	 {"fullUrl":"http://x.org/Patient/p","resource":{"resourceType":"Patient","id":"p","meta":{"versionId":"2"}}},
	 {"fullUrl":"http://x.org/Patient/r","resource":{"resourceType":"Patient","id":"r"}},
	 {"fullUrl":"http://x.org/Patient/r","resource":{"resourceType":"Patient","id":"r"}}]}`,
	// A Bundle in a Bundle, each with its own fullUrls.
	`{"resourceType":"Bundle","type":"collection","entry":[
	 {"fullUrl":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b1","resource":{"resourceType":"Bundle","type":"transaction","entry":[
	  {"fullUrl":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b3","resource":{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b2"}},"request":{"method":"POST","url":"Observation"}}]}},
	 {"fullUrl":"urn:uuid:2f1a0b0e-9a56-4f25-8d19-2a6f04a5c0b2","resource":{"resourceType":"Patient"}}]}`,
}

// TestBundleRulesReuseTheirTables: the bundleCtx storage reused from one
// Bundle to the next carries nothing over, so every Bundle's outcome is
// the same whichever Bundles were validated before it; and a reference to
// the fullUrl of an entry without a resource resolves.
func TestBundleRulesReuseTheirTables(t *testing.T) {
	fresh := make([]*OperationOutcome, len(bundleReuseCases))
	for i, c := range bundleReuseCases {
		fresh[i] = Validate([]byte(c))
	}
	for round := range 3 {
		for k := range bundleReuseCases {
			i := (k*(round+2) + round) % len(bundleReuseCases)
			if got := Validate([]byte(bundleReuseCases[i])); !reflect.DeepEqual(got, fresh[i]) {
				t.Errorf("case %d after others: %v, alone: %v", i, got.Issues, fresh[i].Issues)
			}
		}
	}
	var unresolved []string
	for _, is := range fresh[0].Issues {
		if strings.Contains(is.Diagnostics, "unable to resolve") {
			unresolved = append(unresolved, is.Diagnostics)
		}
	}
	if len(unresolved) != 1 || !strings.Contains(unresolved[0], "c0b9") {
		t.Errorf("unresolved references: %q, want only the one to c0b9", unresolved)
	}
	for _, i := range []int{1, 2} {
		found := false
		for _, is := range fresh[i].Issues {
			found = found || strings.Contains(is.Diagnostics, "found Medication")
		}
		if !found {
			t.Errorf("case %d: no target type issue naming Medication in %v", i, fresh[i].Issues)
		}
	}
	found := false
	for _, is := range fresh[3].Issues {
		found = found || strings.Contains(is.Diagnostics, "bdl-7")
	}
	if !found {
		t.Errorf("case 3: no bdl-7 in %v", fresh[3].Issues)
	}
}

// TestBundleRulesReuseConcurrently: validations running at once, each
// taking and releasing bundleCtx storage, get each Bundle's own outcome.
func TestBundleRulesReuseConcurrently(t *testing.T) {
	fresh := make([]*OperationOutcome, len(bundleReuseCases))
	for i, c := range bundleReuseCases {
		fresh[i] = Validate([]byte(c))
	}
	errs := make(chan string, 8*len(bundleReuseCases))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 4 * len(bundleReuseCases) {
				i := (k + g) % len(bundleReuseCases)
				if got := Validate([]byte(bundleReuseCases[i])); !reflect.DeepEqual(got, fresh[i]) {
					errs <- fmt.Sprintf("case %d: %v, want %v", i, got.Issues, fresh[i].Issues)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
