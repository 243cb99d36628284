package main

import (
	"context"
	"fmt"
)

// runMeasure is not built yet: it says so and exits 2 rather than pretending.
func runMeasure(ctx context.Context, e env) int {
	fmt.Fprintln(e.stderr, "acds measure: not available in this build yet")
	return 2
}
