package notary_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"

	"github.com/acds-project/acds/mpctls/notary"
)

// ExampleNotary_Handler mounts a notary in an HTTP/1.1 server and prints
// the public key its statements are verified with.
func ExampleNotary_Handler() {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	n, err := notary.New(notary.Config{Key: key}) // system roots and resolver
	if err != nil {
		panic(err)
	}
	defer n.Close()
	srv := &http.Server{Addr: "127.0.0.1:7047", Handler: n.Handler()}
	_ = srv // srv.ListenAndServe() serves CONNECT tunnels and /v1/sessions/{id}/finalize

	pub, _ := notary.MarshalPublicKey(n.PublicKey())
	fmt.Println(strings.SplitN(string(pub), "\n", 2)[0])
	// Output: -----BEGIN PUBLIC KEY-----
}
