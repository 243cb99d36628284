package service

import (
	"context"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/mpctls/notary"
)

// SetPortalResolver makes the in-process notary of a service opened with
// o resolve portal names with r.
func SetPortalResolver(o *Options, r notary.Resolver) { o.portalResolver = r }

// OpenBackendForTest is OpenBackend with probe in place of auto's
// hardware detection.
func OpenBackendForTest(ctx context.Context, kind string, o BackendOptions, probe func(string) bool) (attestation.Backend, error) {
	o.probe = probe
	return OpenBackend(ctx, kind, o)
}

// MissRefresh is the least time between two reads of the trust anchors
// caused by bundles the known anchors do not verify.
const MissRefresh = missRefresh
