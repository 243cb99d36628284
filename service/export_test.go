package service

import "github.com/acds-project/acds/mpctls/notary"

// SetPortalResolver makes the in-process notary of a service opened with
// o resolve portal names with r.
func SetPortalResolver(o *Options, r notary.Resolver) { o.portalResolver = r }
