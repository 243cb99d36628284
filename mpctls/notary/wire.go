package notary

import (
	"encoding/json"
	"net/http"

	"github.com/acds-project/acds/mpctls"
)

// SessionHeader is the response header of a successful CONNECT that
// carries the id of the notarized session. The prover names the session by
// this id when it finalizes it.
const SessionHeader = "Acds-Notary-Session"

// AddressHeader is the response header of a successful CONNECT that
// carries the address the notary resolved and dialled, "ip:port" — the
// address the statement will name. It lets a prover refuse a target its
// own address rules forbid before it sends anything through the tunnel
// (prover.Dialer.AllowAddr).
const AddressHeader = "Acds-Notary-Address"

// FinalizePath returns the control path that finalizes session id:
// POST it a JSON FinalizeRequest once the tunnel is closed.
func FinalizePath(id string) string { return "/v1/sessions/" + id + "/finalize" }

// FinalizeRequest is the prover's disclosure, sent after the tunnel has
// closed. It never carries client-direction keys or plaintext.
type FinalizeRequest struct {
	// ServerHandshakeTrafficSecret is the TLS 1.3 server handshake traffic
	// secret, which lets the notary decrypt and check the server's
	// handshake flight. Empty for TLS 1.2, whose identity proof is plaintext.
	ServerHandshakeTrafficSecret []byte `json:"serverHandshakeTrafficSecret,omitempty"`
	// ClientRecords and ServerRecords are how many records the prover
	// sent and received. The statement covers the records of each
	// direction below these counts; a record the notary relayed but the
	// prover never read (for example a server alert after the prover
	// closed) is left out. Counts above what the notary relayed are refused.
	ClientRecords uint64 `json:"clientRecords"`
	ServerRecords uint64 `json:"serverRecords"`
}

// FinalizeResponse is the notary's answer to a finalize request.
type FinalizeResponse struct {
	// Statement is the signed statement (COSE_Sign1), as mpctls.ParseStatement reads it.
	Statement []byte `json:"statement"`
	// Order gives the arrival order of the records at the notary, which is
	// the leaf order of the statement's Merkle tree, as run lengths (see
	// mpctls.Order). Within a direction records keep their sequence order,
	// so this is all a prover needs to rebuild the tree from its own
	// records (mpctls.Interleave).
	Order mpctls.Order `json:"order"`
}

// Problem is the RFC 9457 error body of the control endpoint and of a
// refused CONNECT.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// Problem type URNs the notary uses, by error class.
const (
	ProblemRefused     = "urn:acds:problem:notary-refused"
	ProblemUnavailable = "urn:acds:problem:unavailable"
	ProblemTarget      = "urn:acds:problem:notary-target"
	// ProblemTargetUnresolved is the 502 answer to a CONNECT whose host
	// name does not resolve; its detail names the host and the kind of
	// failure, never the notary's resolver.
	ProblemTargetUnresolved = "urn:acds:problem:notary-target-unresolved"
	ProblemNotFound         = "urn:acds:problem:not-found"
	ProblemSession          = "urn:acds:problem:notary-session"
	ProblemInvalid          = "urn:acds:problem:invalid-request"
	ProblemInternal         = "urn:acds:problem:internal"
)

func writeProblem(w http.ResponseWriter, status int, typ, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(Problem{Type: typ, Title: title, Status: status, Detail: detail})
}
