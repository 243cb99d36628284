package fhir

import "testing"

// largestSynthea returns the largest shared Synthea bundle.
func largestSynthea(b *testing.B) []byte {
	data, _ := loadSynthea(b)
	big := data[0]
	for _, d := range data {
		if len(d) > len(big) {
			big = d
		}
	}
	return big
}

// BenchmarkValidateTyped: Validate as it now runs, decoding into the typed
// R4 model and validating that, on the largest Synthea bundle. Compare
