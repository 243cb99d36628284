package main

import (
	"context"
	"fmt"
)

// runFHIR is not built yet: it says so and exits 2 rather than pretending.
func runFHIR(ctx context.Context, e env) int {
	fmt.Fprintln(e.stderr, "acds fhir: not available in this build yet")
	return 2
}
