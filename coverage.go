package acds

// Coverage (extension, DESIGN §4) says what a fetched record was
// assembled from: whether the portal's Patient/{id}/$everything answered
// it, every FHIR API request made for it with its status, pages and
// entries, and the types of the patient's compartment the portal does not
// search, so that a relying party sees an incomplete record for what it
// is. The enclave signs it in the claims of a fetched output; POST
// /v1/verify shows it as details.coverage, and a completed request's
// result carries it.
//
// The struct tags give both encodings: JSON on the wire, and the
// deterministic CBOR of the signed claims (package attestation), whose
// integer keys never change.
type Coverage struct {
	// Everything is true when the record is the answer of
	// Patient/{id}/$everything, false when it was assembled from
	// searches of the compartment's types.
	Everything bool `json:"everything" cbor:"1,keyasint"`
	// CapabilityStatement is true when the portal's CapabilityStatement
	// (GET [base]/metadata) decided what was asked; false when it
	// published none, and every compartment type was tried.
	CapabilityStatement bool `json:"capabilityStatement" cbor:"2,keyasint"`
	// Requests are the FHIR API requests, in the order they were made:
	// each is one read, search or operation with the next pages it was
	// followed through.
	Requests []CoverageRequest `json:"requests" cbor:"3,keyasint"`
	// Unsupported lists, sorted, the compartment types the portal does
	// not search by patient (absent from its CapabilityStatement, without
	// a search by any of the type's compartment parameters, or refused as
	// unknown when it published none): the record holds only what reading
	// their references found of them.
	Unsupported []string `json:"unsupported,omitempty" cbor:"4,keyasint,omitempty"`
}

// CoverageRequest is one FHIR API request of a Coverage.
type CoverageRequest struct {
	// RequestLine is the HTTP/1.1 request line of its first page, as sent
	// ("GET /fhir/Observation?subject=Patient%2F7&_count=100 HTTP/1.1").
	RequestLine string `json:"requestLine" cbor:"1,keyasint"`
	// Status is the HTTP status of its last answer.
	Status int `json:"status" cbor:"2,keyasint"`
	// Pages is the number of answers read: the first page and every next
	// page followed.
	Pages int `json:"pages" cbor:"3,keyasint"`
	// Entries is the number of the record's resources its answers held:
	// a read's one resource, a search's matching entries over all its
	// pages (a resource two searches both match counts in each; the record
	// holds it once); 0 for the CapabilityStatement, which is not part of
	// the record.
	Entries int `json:"entries" cbor:"4,keyasint"`
}
