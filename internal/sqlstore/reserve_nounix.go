//go:build !unix

package sqlstore

import "errors"

// freeBytes is not measured here, so no reserve is written.
func freeBytes(string) (int64, error) { return 0, errors.ErrUnsupported }
