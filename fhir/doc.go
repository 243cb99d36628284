// Package fhir is what the ACDS enclave runs on every clinical record: it
// validates FHIR R4 JSON, normalises it into a canonical collection Bundle
// with a Provenance resource, and optionally de-identifies it under HIPAA
// Safe Harbor.
//
// Process is the pipeline entry point:
//
//	out, err := fhir.Process(input, fhir.Options{
//		Format:      fhir.FormatR4,       // or fhir.FormatR4Deidentified
//		Source:      "portal.example.org", // or "raw"
//		Measurement: measurementHex,
//		Now:         time.Now(),
//		DeidentKey:  key,                  // ≥ 32 bytes, de-identified format only
//	})
//	var invalid *fhir.InvalidError
//	if errors.As(err, &invalid) {
//		// invalid.Outcome is the OperationOutcome to return to the caller
//	}
//	// out.JSON is canonical JSON, out.Digest "sha256:<hex>" of it
//
// Validate checks input without transforming it and returns an
// OperationOutcome with FHIRPath locations such as
// Patient.name[0].given[1].
//
// The package works on raw JSON with its own parser (size and depth
// limited) and the generated element tables of package fhir/spec; it does
// not depend on the typed model in fhir/r4.
//
// # Canonical output
//
// Output is serialised per RFC 8785 (JSON Canonicalization Scheme):
// members sorted by UTF-16 code units, no insignificant whitespace,
// minimal string escapes and ECMAScript number formatting. FHIR decimals
// therefore lose trailing zeros (1.50 becomes 1.5) and digits beyond
// float64 precision; the digest is over exactly these bytes.
//
// # Normalisation
//
// Every resource keeps its id (or gets the uuid of its urn:uuid fullUrl,
// or an id derived from its content); urn:uuid, absolute and relative
// references to Bundle entries are rewritten to ResourceType/id; exact
// duplicates are dropped. Entries' fullUrls are Options.BaseURL + "/" +
// ResourceType/id. The last entry is a Provenance whose agent identifies
// the enclave measurement (system MeasurementSystem), whose entity names
// the source (system SourceSystem), and whose targets are every other
// entry. A Provenance ACDS produced earlier (meta.tag TagSystem#provenance)
// is replaced, so processing an output again with the same Options
// returns the same bytes.
package fhir
