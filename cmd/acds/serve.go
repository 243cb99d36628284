package main

import (
	"context"
	"fmt"
)

// runServe is not built yet: it says so and exits 2 rather than pretending.
func runServe(ctx context.Context, e env) int {
	fmt.Fprintln(e.stderr, "acds serve: not available in this build yet")
	return 2
}
