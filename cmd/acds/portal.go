package main

import (
	"context"
	"fmt"
)

// runPortal is not built yet: it says so and exits 2 rather than pretending.
func runPortal(ctx context.Context, e env) int {
	fmt.Fprintln(e.stderr, "acds portal: not available in this build yet")
	return 2
}
