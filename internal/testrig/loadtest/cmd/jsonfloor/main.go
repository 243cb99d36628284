// Command jsonfloor is the baseline of the accept-path measurement
// (scripts/accept-bench.sh): a net/http server whose
// POST handler only reads the body and checks that it is JSON, then
// answers 202 — the least any JSON API must do per request, with no
// validation, authentication or durability.
//
// With --fhir-check and --durable DIR it is instead the least work a
// correct acceptance must do: the body's data member is checked as FHIR
// R4 with fhir.Check (a Bundle that is not valid R4 is refused with 422)
// and the body is stored durably through the same SQLite store and group
// commit as acds serve, before the 202 — without authentication, limits,
// metrics or the request record's other rules.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	acds "github.com/acds-project/acds"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/internal/base/jsonscan"
	"github.com/acds-project/acds/internal/stores/sqlstore"
	"github.com/acds-project/acds/store"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	check := flag.Bool("fhir-check", false, "check the body's data member with fhir.Check")
	durable := flag.String("durable", "", "store each body durably in a SQLite store in this directory")
	flag.Parse()
	var st *sqlstore.SQLite
	if *durable != "" {
		if err := os.MkdirAll(*durable, 0o700); err != nil {
			fail(err)
		}
		var err error
		if st, err = sqlstore.OpenSQLite(context.Background(), filepath.Join(*durable, "floor.db")); err != nil {
			fail(err)
		}
		defer st.Close()
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fail(err)
	}
	fmt.Printf("jsonfloor listening on http://%s\n", ln.Addr())
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if *check {
			// The data member, found with one scan of the body that
			// skips (and checks) the other members; fhir.Check reads
			// the data itself.
			var data []byte
			_, err := jsonscan.Object(b, jsonscan.SkipSpace(b, 0), 0, func(key []byte, i int) (int, error) {
				end, err := jsonscan.Value(b, i, 1)
				if err == nil && string(key) == "data" {
					data = b[i:end]
				}
				return end, err
			})
			if err != nil || data == nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			if fhir.Check(data, fhir.Options{}) != nil {
				w.WriteHeader(http.StatusUnprocessableEntity)
				return
			}
		} else if !json.Valid(b) {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		id := uuid.Must(uuid.NewV7()).String() // as acds serve makes them
		if st != nil {
			now := time.Now()
			if err := st.CreateRequest(r.Context(), store.Request{ID: id, Owner: "floor", Kind: acds.KindProcess, Input: b, CreatedAt: now, UpdatedAt: now}); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"requestId":"`+id+`","status":"processing"}`)
	})
	if err := http.Serve(ln, h); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
