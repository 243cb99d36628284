package main

import (
	"context"
	"fmt"
)

// runDemo is not built yet: it says so and exits 2 rather than pretending.
func runDemo(ctx context.Context, e env) int {
	fmt.Fprintln(e.stderr, "acds demo: not available in this build yet")
	return 2
}
