// Package fhir is what the ACDS enclave runs on every clinical record: it
// validates FHIR R4 JSON, normalises it into a canonical collection Bundle
// with a Provenance resource, and optionally de-identifies it under HIPAA
// Safe Harbor, summarises it as an International Patient Summary, or
// answers a FHIRPath query over it.
//
// Process is the pipeline entry point:
//
//	out, err := fhir.Process(input, fhir.Options{
//		Format:      acds.OutputFHIRR4,       // or another output format, below
//		Source:      "portal.example.org", // or "raw"
//		Measurement: measurementHex,
//		Now:         time.Now(),
//		DeidentKey:  key,                  // ≥ 32 bytes, de-identified format only
//		Query:       "",                   // the expression, fhirpath format only
//	})
//	var invalid *fhir.InvalidError
//	if errors.As(err, &invalid) {
//		// invalid.Outcome is the OperationOutcome to return to the caller
//	}
//	// out.JSON is canonical JSON, out.Digest "sha256:<hex>" of it
//
// # Output formats
//
//   - acds.OutputFHIRR4 ("fhir_r4"): the normalised record, a collection
//     Bundle (see Normalisation).
//   - acds.OutputFHIRR4Deidentified ("fhir_r4_deidentified"): the same,
//     de-identified (see De-identification); Options.DeidentKey is required.
//   - acds.OutputFHIRR4IPS ("fhir_r4_ips"): an International Patient
//     Summary document Bundle built from the normalised record: a
//     Composition (LOINC 60591-5) whose subject is the record's Patient,
//     whose author is the enclave as a Device identified by its measurement
//     and whose date is Options.Now; the required medication, allergy and
//     problem sections (with an emptyReason when the record holds none),
//     the immunization, results, vital signs, procedures, devices, social
//     history and plan of care sections the record supports, a generated
//     narrative per section, and every resource the entries reference, so
//     each reference resolves. Nothing is invented but the Composition and
//     the Device. Output.RecordDigest is the digest of the normalised
//     record it was built from.
//   - acds.OutputFHIRPath ("fhirpath"): Options.Query, a FHIRPath
//     expression, evaluated over the normalised record's entry resources
//     (%bundle is the whole Bundle); the output is a Parameters resource
//     whose first parameter, "expression", holds the query and which has
//     one typed "result" parameter per value. Output.RecordDigest is the
//     digest of the normalised record (the fhir_r4 output) the query ran
//     on. Evaluation is bounded by Options.QueryLimits (time, steps,
//     results, output size); a query that does not parse or exceeds a
//     bound fails with a *QueryError (ErrQuery), whose Offset points into
//     the expression. CompileQuery parses a query as Process will, for a
//     server that refuses a bad query when the request arrives.
//
// For the three Bundle formats, Output.Entries are the items of the output
// Bundle's top-level "entry" array as the encoder wrote them (sub-slices of
// Output.JSON): what a selective-disclosure commitment
// (package attestation/disclosure) covers, handed over so that the
// commitment need not scan the output for them.
//
// Validate checks input without transforming it and returns an
// OperationOutcome with FHIRPath locations such as
// Patient.name[0].given[1]. Check validates exactly as Process does and
// returns its *InvalidError, for a server that checks a submission when it
// arrives and processes it later.
//
// # One parser, one model
//
// Every stage works on the typed R4 model of package fhir/r4, which is
// generated from the official definitions:
//
//  1. decode: r4.Options.Decode reads the JSON into typed structs (no
//     reflection), reporting every unknown property, wrong JSON type,
//     duplicate member or pre-R4 shape with its path instead of stopping at
//     the first, within size, depth and model-memory limits;
//  2. validate: one walk over the model (r4.Walk with the element tables of
//     package fhir/spec) checks formats, cardinality, choices, bindings,
//     references, the Bundle rules, the contexts of core extensions and
//     every constraint of the R4 definitions (the error-level ones as
//     errors), evaluated with package fhir/fhirpath and compiled once;
//  3. normalise (and de-identify) the same structs in place;
//  4. encode: r4.AppendCanonical writes the output in canonical form (for
//     a Bundle, r4.AppendCanonicalBundle, which also reports where each
//     entry is), and its SHA-256 is the digest.
//
// The input is parsed once; nothing is re-read as untyped JSON.
//
// # Canonical output
//
// Output is serialised in the manner of RFC 8785 (JSON Canonicalization
// Scheme): members sorted by UTF-16 code units, no insignificant
// whitespace, minimal string escapes. Numbers are the one departure: they
// keep the digits they were written with, because FHIR decimals carry
// their precision in those digits (1.50 is not 1.5), so nothing of a
// measured value is lost. The digest is over exactly these bytes.
//
// # Normalisation
//
// Every resource keeps its id (or gets the uuid of its urn:uuid fullUrl,
// or an id derived from its content); urn:uuid, absolute and relative
// references to Bundle entries are rewritten to ResourceType/id, a
// relative reference resolving against its entry's RESTful base before
// the bare ResourceType/id (FHIR R4 Bundle reference rules); exact
// duplicates are dropped. Only the entry resources and their contained
// resources are rewritten: a Bundle or Parameters nested in an entry is a
// scope of its own, where references resolve among its own resources, and
// it is kept as it is. Entries' fullUrls are Options.BaseURL + "/" +
// ResourceType/id. The last entry is a Provenance whose agent identifies
// the enclave measurement (system MeasurementSystem), whose entity names
// the source (system SourceSystem), and whose targets are every other
// entry. A Provenance ACDS produced earlier (meta.tag TagSystem#provenance)
// is replaced, so processing an output again with the same Options
// returns the same bytes; input that is nothing but such a Provenance has
// no resources to process.
//
// # De-identification
//
// The de-identified format (acds.OutputFHIRR4Deidentified) follows the HIPAA Safe Harbor method, 45 CFR
// 164.514(b)(2)(i), over the typed structure of each resource:
//
//   - a patient's contacts (relatives, guardians) are removed;
//   - names (HumanName), telecom (ContactPoint: phone, fax, e-mail, URLs),
//     photos and attachments (Attachment), binary content such as
//     signature data (base64Binary), free-text notes (Annotation) and
//     narrative (Narrative, xhtml) are removed;
//   - addresses keep only state, country and the first three ZIP digits,
//     "000" for the 17 three-digit prefixes with 20,000 or fewer people in
//     the 2000 Census; coordinates (Location.position and the geolocation
//     extension) are removed;
//   - every date, dateTime and instant is reduced to its year, the UTC
//     year when it has a time (so a Period's start stays before its end);
//     instants become January 1 of that year at 00:00:00Z, so a required
//     instant such as a document's timestamp stays. A year more than 89
//     years before Options.Now would show the individual is over 89: it
//     becomes the year 90 years before Options.Now (the single "90 or
//     older" category), for every birth date (patients, relatives,
//     practitioners) and every other date alike. The patient-birthTime
//     extension is removed;
//   - ages of 90 years or more are grouped however they are expressed: Age
//     values, Ranges in the choices that allow an Age (onset[x],
//     abatement[x], age[x], deceased[x], performed[x]…) and the value of an
//     Observation or component coded LOINC 30525-0, 21612-7, 29553-5,
//     21611-9, 30972-4, 39016-1 or 63900-5. Values are first converted to
//     years from their UCUM code or unit text (a, mo, wk, d, h, min, s, with
//     a 365-day year so borderline ages are grouped; no unit means years),
//     so 120 d stays 120 d. An age or lower bound of 90 years or more
//     becomes ">= 90" years (a Range's low becomes 90 years); an upper bound
//     of 90 years or more ("< 95", "<= 90", a Range's high) is removed, since
//     it would split the category and no smaller bound would be true;
//   - identifiers (SSN, MRN, member, account, licence, device numbers…),
//     device serial, lot and UDI numbers and DICOM UIDs (ImagingStudy
//     series and instance uid) become keyed HMAC-SHA-256 pseudonyms, and
//     resource ids likewise, so references still resolve:
//     nested resources' ids too (contained resources, with their "#id"
//     references, and the resources of nested Bundles and Parameters, whose
//     references are resolved within their own scope);
//   - a nested Bundle's fullUrls, request URLs and response locations
//     become pseudonyms (a search's query string is dropped, an
//     unrecognised request URL masked, an unrecognised location removed),
//     its links are removed, and a nested document keeps the first instant
//     of its timestamp's year (a document needs one);
//   - Reference.display is removed, and references outside the Bundle
//     (which would carry foreign identifiers) are dropped;
//   - url values and free-text strings are removed except terminology
//     text (Coding.display, CodeableConcept.text, units); names of
//     organisations and locations go too, since they can reveal where the
//     individual lives. In the text kept, every date written by a person
//     (2013-04-10, 04/10/2013, April 10, 2013…) is reduced to its year
//     (under the 90-year rule below), a date with a two-digit year is
//     removed, and so is every run of seven digits or more (telephone,
//     social security and record numbers);
//   - uri and canonical values are removed (Device.url, policies, an
//     answer's valueUri…) unless they name terminology or definitions:
//     code and identifier systems, Reference.type, canonical references
//     (Meta.profile, instantiatesCanonical, questionnaire…),
//     instantiatesUri, protocols, item definitions, UDI issuers, a nested
//     Bundle's fullUrls (pseudonyms by then, see above), and every URI of a
//     definitional resource (Questionnaire, ValueSet, PlanDefinition…);
//     implicitRules and meta.source are always removed, and version ids
//     (meta.versionId, "/_history/" in references) become keyed pseudonyms;
//   - the primitive values of extensions with arbitrary urls, of
//     Parameters and of Task inputs and outputs (codes, ids, strings, URIs,
//     integers, decimals…) are removed; booleans, dates (reduced as above),
//     complex values under their own rules (Coding, CodeableConcept,
//     Quantity…) and the value-set codes of the data-absent-reason and US
//     Core birth sex extensions stay;
//   - any remaining string holding an IPv4 or IPv6 address (with a port,
//     in a URL, IPv4-mapped), in an Identifier.system, Address.state or
//     country or elsewhere, is removed, and so is an extension whose url
//     holds one.
//
// A removed element that FHIR requires is replaced by the
// data-absent-reason extension with code "masked", so the output stays
// valid R4. Likewise every error-level constraint that held on an element
// before de-identification is checked again after it, and one that the
// removals broke is repaired by masking what was removed, never by
// restoring it: a masked primitive or data type where the constraint
// names one (org-1: an Organization whose name went keeps a masked name;
// app-1, exp-1, inv-1…), a placeholder narrative saying that the text was
// removed (cmp-1: a section's text).
package fhir
