package server

import (
	_ "embed"
	"net/http"
	"strconv"
)

//go:embed openapi.json
var openAPI []byte

// OpenAPIDocument returns a copy of the OpenAPI 3.0.3 document of the v1
// contract, the one served at GET /v1/openapi.json.
func OpenAPIDocument() []byte { return append([]byte(nil), openAPI...) }

func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(openAPI)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPI)
}
