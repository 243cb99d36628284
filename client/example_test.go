package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
)

func Example() {
	// A server to talk to (in real use: the URL of `acds serve`).
	srv, _ := server.New(server.Config{Store: servertest.NewMemStore(), Pipeline: &servertest.Pipeline{}, Enclave: servertest.NewEnclave()})
	defer srv.Close(context.Background())
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	ctx := context.Background()
	c, err := client.New(ts.URL, nil)
	if err != nil {
		panic(err)
	}
	sess, err := c.Anon(ctx, "")
	if err != nil {
		panic(err)
	}
	c = c.WithToken(sess.Token)

	acc, err := c.Process(ctx, acds.ProcessRequest{
		Data:         json.RawMessage(`{"resourceType":"Bundle","type":"collection"}`),
		OutputFormat: acds.OutputFHIRR4,
	})
	if err != nil {
		panic(err)
	}
	rec, err := c.Wait(ctx, acc.RequestID)
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.Status, rec.Result.OutputFormat)

	// Errors are *acds.Problem values.
	_, err = c.Process(ctx, acds.ProcessRequest{Data: json.RawMessage(`{"resourceType":"Bundle"}`), OutputFormat: "pdf"})
	var p *acds.Problem
	if errors.As(err, &p) {
		fmt.Println(p.Status, p.Code())
	}
	// Output:
	// completed fhir_r4
	// 422 unsupported-output-format
}
