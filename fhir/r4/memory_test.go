package r4_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds/fhir/r4"
)

// The tests here check that Options.MaxModelBytes bounds the memory decoding
// really allocates (runtime.MemStats.TotalAlloc, which counts collected
// garbage too), not just the size of what the decoded model keeps: slice
// growth leaves unused capacity and abandons smaller arrays, and input made
// of many tiny items that each decode into a large struct used to allocate
// five times the limit before it was refused.

// allocBound is how many times the model limit decoding may allocate in
// all: the model count covers structs, string blocks and every backing
// array at full capacity; the rest is allocator size-class rounding and
// errors.
const allocBound = 1.5

// defaultModelLimit is the limit Options{} applies to an input of n bytes.
func defaultModelLimit(n int) int { return r4.DefaultModelFactor*n + 1<<20 }

// allocated runs f and returns the bytes it allocated and the time it took.
func allocated(f func()) (uint64, time.Duration) {
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	f()
	elapsed := time.Since(start)
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc, elapsed
}

// repeatItems returns prefix, then item n times separated by commas, then
// suffix.
func repeatItems(prefix, item string, n int, suffix string) []byte {
	var b bytes.Buffer
	b.Grow(len(prefix) + n*(len(item)+1) + len(suffix))
	b.WriteString(prefix)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item)
	}
	b.WriteString(suffix)
	return b.Bytes()
}

// extensionTree returns an Extension whose "extension" array holds width
// such extensions, depth levels deep: {"url":"x","extension":[…]}.
func extensionTree(b *bytes.Buffer, width, depth int) {
	if depth == 0 {
		b.WriteString(`{"url":"x"}`)
		return
	}
	b.WriteString(`{"url":"x","extension":[`)
	for i := range width {
		if i > 0 {
			b.WriteByte(',')
		}
		extensionTree(b, width, depth-1)
	}
	b.WriteString(`]}`)
}

type hostileDocument struct {
	name string
	data []byte
}

// hostileDocuments are inputs of 8 to 32 MiB built to expand: each decodes
// into far more memory than the default limit allows.
func hostileDocuments() []hostileDocument {
	// Deep arrays of small objects: extensions of extensions, three to a
	// level, 12 levels deep (about 800,000 of them).
	var tree bytes.Buffer
	tree.WriteString(`{"resourceType":"Patient","extension":[`)
	extensionTree(&tree, 3, 12)
	tree.WriteString(`]}`)
	return []hostileDocument{
		// The review's case: a Patient under fhir.DefaultMaxBytes made of
		// tiny extensions, each an Extension of about 450 bytes and a
		// Boolean.
		{"extensions with values", repeatItems(`{"resourceType":"Patient","extension":[`,
			`{"url":"x","valueBoolean":true}`, 990_000, `]}`)},
		{"bare extensions", repeatItems(`{"resourceType":"Patient","extension":[`,
			`{"url":"x"}`, 800_000, `]}`)},
		{"extension tree", tree.Bytes()},
		// Long primitive arrays: a String item per 4 bytes of "given", and
		// its "_given" companion giving each an extension array.
		{"given with _given", repeatItems(`{"resourceType":"Patient","name":[{"given":[`,
			`"a"`, 500_000, `],"_given":[`+strings.Repeat(`{"extension":[{"url":"x"}]},`, 499_999)+`{"extension":[{"url":"x"}]}]}]}`)},
		// Contained resources, each a whole struct of over 800 bytes.
		{"contained", repeatItems(`{"resourceType":"Patient","contained":[`,
			`{"resourceType":"ActivityDefinition"}`, 300_000, `]}`)},
		// A Bundle of many small entries.
		{"bundle entries", repeatItems(`{"resourceType":"Bundle","type":"collection","entry":[`,
			`{"fullUrl":"x"}`, 700_000, `]}`)},
	}
}

// TestModelLimitBoundsAllocation decodes input built to expand with the
// default limits, with Unmarshal and with Decode: each is refused with
// ErrLimit after allocating no more than a small multiple of the limit.
func TestModelLimitBoundsAllocation(t *testing.T) {
	for _, doc := range hostileDocuments() {
		data := doc.data
		t.Run(doc.name, func(t *testing.T) {
			if len(data) < 8<<20 || len(data) > 32<<20 {
				t.Fatalf("input is %d bytes, want 8 to 32 MiB", len(data))
			}
			limit := defaultModelLimit(len(data))
			var err error
			n, took := allocated(func() { _, err = r4.Unmarshal(data) })
			t.Logf("Unmarshal: input %.1f MB, limit %.0f MB, allocated %.0f MB (%.2f times the limit) in %v",
				float64(len(data))/1e6, float64(limit)/1e6, float64(n)/1e6, float64(n)/float64(limit), took.Round(time.Millisecond))
			if !errors.Is(err, r4.ErrLimit) {
				t.Fatalf("Unmarshal: got %v, want ErrLimit", err)
			}
			if float64(n) > allocBound*float64(limit) {
				t.Errorf("Unmarshal allocated %d bytes, more than %.1f times the limit of %d", n, allocBound, limit)
			}

			var errs []*r4.DecodeError
			n, took = allocated(func() { _, errs = r4.Options{}.Decode(data) })
			t.Logf("Decode: allocated %.0f MB (%.2f times the limit) in %v",
				float64(n)/1e6, float64(n)/float64(limit), took.Round(time.Millisecond))
			if len(errs) == 0 || !errors.Is(errs[len(errs)-1], r4.ErrLimit) {
				t.Fatalf("Decode: got %v, want ErrLimit last", errs)
			}
			if float64(n) > allocBound*float64(limit) {
				t.Errorf("Decode allocated %d bytes, more than %.1f times the limit of %d", n, allocBound, limit)
			}
		})
	}
}

// TestModelLimitSetByCaller checks the bound with a limit set in Options
// rather than derived from the input size.
func TestModelLimitSetByCaller(t *testing.T) {
	data := hostileDocuments()[1].data
	for _, limit := range []int{1 << 20, 16 << 20, 64 << 20} {
		var err error
		n, _ := allocated(func() { _, err = r4.Options{MaxModelBytes: limit}.Unmarshal(data) })
		if !errors.Is(err, r4.ErrLimit) {
			t.Fatalf("limit %d: got %v, want ErrLimit", limit, err)
		}
		if float64(n) > allocBound*float64(limit) {
			t.Errorf("limit %d: allocated %d bytes, %.2f times the limit", limit, n, float64(n)/float64(limit))
		}
	}
}

// TestModelLimitAdmitsLongArrays: the limit refuses what would not fit, not
// what is merely long. An array whose items fit in the limit, with room for
// its growth, decodes, and needs no more than the limit.
func TestModelLimitAdmitsLongArrays(t *testing.T) {
	// About 60,000 Extensions of 456 bytes: some 27 MB of items, whose
	// backing arrays, grown by doubling, add up to less than 4 times that.
	data := repeatItems(`{"resourceType":"Patient","extension":[`, `{"url":"x"}`, 60_000, `]}`)
	limit := 128 << 20
	var err error
	n, _ := allocated(func() { _, err = r4.Options{MaxModelBytes: limit}.Unmarshal(data) })
	if err != nil {
		t.Fatalf("Unmarshal with a %d-byte limit: %v", limit, err)
	}
	if n > uint64(limit) {
		t.Errorf("allocated %d bytes, more than the limit of %d", n, limit)
	}
}

// minimalModelLimit returns the smallest MaxModelBytes that admits data
// (to 1%), found by bisection.
func minimalModelLimit(t *testing.T, data []byte) int {
	t.Helper()
	lo, hi := 0, defaultModelLimit(len(data))
	if _, err := (r4.Options{MaxModelBytes: hi}).Unmarshal(data); err != nil {
		t.Fatalf("the default limit does not admit the input: %v", err)
	}
	for hi-lo > hi/100 {
		mid := lo + (hi-lo)/2
		_, err := r4.Options{MaxModelBytes: mid}.Unmarshal(data)
		switch {
		case err == nil:
			hi = mid
		case errors.Is(err, r4.ErrLimit):
			lo = mid
		default:
			t.Fatalf("limit %d: %v", mid, err)
		}
	}
	return hi
}

// TestModelLimitMatchesAllocation checks, on real documents, that the model
// count is what decoding allocates: decoding with the smallest limit that
// admits the document allocates about that limit, not several times it.
// The documents are the largest Synthea bundle and official examples with
// long arrays of large structs, where slice growth weighs most.
func TestModelLimitMatchesAllocation(t *testing.T) {
	docs := map[string][]byte{"largest Synthea bundle": largestSynthea(t)}
	defs := filepath.Join(repoRoot(t), ".fhir-defs", "package")
	for _, name := range []string{"ValueSet-v3-ActCode.json", "CodeSystem-v2-0371.json", "StructureDefinition-Patient.json"} {
		data, err := os.ReadFile(filepath.Join(defs, name))
		if err != nil {
			t.Logf("%s left out: %v", name, err)
			continue
		}
		docs[name] = data
	}
	for name, data := range docs {
		t.Run(name, func(t *testing.T) {
			limit := minimalModelLimit(t, data)
			var err error
			n, _ := allocated(func() { _, err = r4.Options{MaxModelBytes: limit}.Unmarshal(data) })
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("input %d bytes: smallest limit admitting it %d (%.2f times the input), allocated %d (%.2f times that limit)",
				len(data), limit, float64(limit)/float64(len(data)), n, float64(n)/float64(limit))
			if float64(n) > 1.25*float64(limit) {
				t.Errorf("allocated %d bytes, %.2f times the smallest limit that admits the input (%d)", n, float64(n)/float64(limit), limit)
			}
		})
	}
}

// BenchmarkUnmarshalLargest is r4.Unmarshal alone on the largest Synthea
// bundle (about 3 MB). MB/s is its speed; json-any-MB/s is that of
// encoding/json.Unmarshal into any on the same bundle, timed by hand in the
// same iterations (with the benchmark timer stopped) as a baseline that
// load on a shared machine affects alike.
func BenchmarkUnmarshalLargest(b *testing.B) {
	data := largestSynthea(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	var baseline time.Duration
	for b.Loop() {
		b.StopTimer()
		start := time.Now()
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			b.Fatal(err)
		}
		baseline += time.Since(start)
		b.StartTimer()
		if _, err := r4.Unmarshal(data); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(data))*float64(b.N)/baseline.Seconds()/1e6, "json-any-MB/s")
}
