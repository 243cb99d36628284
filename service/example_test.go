package service_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/service"
)

// Mount the real service, with a durable SQLite store in a data directory,
// under /clinical/ in an application's own mux.
func Example() {
	dir, err := os.MkdirTemp("", "acds-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	svc, err := service.Open(ctx, service.Options{DataDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer svc.Close(ctx)

	mux := http.NewServeMux()
	mux.Handle("/clinical/", http.StripPrefix("/clinical", svc.Handler()))
	ts := httptest.NewServer(mux) // in a program: http.ListenAndServe(addr, mux)
	defer ts.Close()

	c, err := client.New(ts.URL+"/clinical", nil)
	if err != nil {
		log.Fatal(err)
	}
	h, err := c.Health(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(h.Status, h.Enclave, svc.Enclave().Profile())
	// Output: healthy sev-snp-sim sev-snp-sim
}
