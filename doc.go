// Package acds holds the v1 wire contract of the Attested Clinical Data
// Service: request and response types for every endpoint, status values and
// the RFC 9457 Problem error type.
//
// The package imports only the standard library, so clients in any Go
// program can depend on it without pulling in the service.
//
// # Endpoints
//
//	POST   /v1/auth/anon          AnonRequest (optional)   → 201 Session
//	POST   /v1/auth/recover       RecoverRequest           → 200 Session
//	POST   /v1/fetch-and-attest   FetchAndAttestRequest    → 202 Accepted
//	POST   /v1/process            ProcessRequest           → 202 Accepted
//	GET    /v1/requests/{id}                               → 200 Request
//	GET    /v1/requests?limit=&cursor=                     → 200 RequestList
//	DELETE /v1/requests/{id}                               → 204
//	POST   /v1/verify             VerifyRequest            → 200 VerifyResponse
//	GET    /v1/health                                      → 200 Health
//	GET    /v1/openapi.json                                → 200 OpenAPI 3.0.3 document
//	GET    /v1/attestation                                 → 200 Attestation
//
// Every error is a [Problem] served as application/problem+json; its Type
// is "urn:acds:problem:" followed by one of the Problem* codes and never
// changes between versions.
package acds

// Version is the semantic version of the service and of this wire contract
// implementation; GET /v1/health reports it.
const Version = "0.1.0"
