// Package acds holds the v1 wire contract of the Attested Clinical Data
// Service: request and response types for every endpoint, status values and
// the RFC 9457 Problem error type.
//
// The package imports only the standard library, so clients in any Go
// program can depend on it without pulling in the service.
package acds
