// Command bundle20k prints the body of a POST /v1/process with the
// loadtest package's 20 KB FHIR R4 Bundle, for scripts/accept-bench.sh.
package main

import (
	"fmt"

	"github.com/acds-project/acds/internal/testrig/loadtest"
)

func main() {
	fmt.Printf(`{"data":%s,"outputFormat":"fhir_r4"}`, loadtest.Bundle20KB(1))
}
