package main

import (
	"context"
	"fmt"
)

// runManifest is not built yet: it says so and exits 2 rather than pretending.
func runManifest(ctx context.Context, e env) int {
	fmt.Fprintln(e.stderr, "acds manifest: not available in this build yet")
	return 2
}
