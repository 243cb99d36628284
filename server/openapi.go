package server

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"net/http"
	"strconv"
)

//go:embed openapi.json
var openAPI []byte

// OpenAPIDocument returns a copy of the OpenAPI 3.0.3 document of the v1
// contract, the one served at GET /v1/openapi.json.
func OpenAPIDocument() []byte { return append([]byte(nil), openAPI...) }

// rootServer is the document's one server entry: the API at the root.
var rootServer = []byte(`"url": "/"`)

// handleOpenAPI serves the document. Mounted under a prefix, its server
// URL is the prefix, so that a client generated from it calls the paths
// where they are served.
func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	doc := openAPI
	if p := mountPrefix(r); p != "" {
		q, _ := json.Marshal(p) // a string always encodes
		doc = bytes.Replace(openAPI, rootServer, append([]byte(`"url": `), q...), 1)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(doc)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(doc)
}
