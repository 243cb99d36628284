package portal

import "time"

// testConnector is a connector for loopback portals with quick retries.
func testConnector() *Connector {
	return &Connector{Guard: Guard{AllowPrivate: true}, Backoff: 5 * time.Millisecond, Count: 40}
}

// testCreds is a login for portals that do not check it.
var testCreds = Credentials{Username: "user", Password: "password"}

// portalHost is a name the test notary resolves to 127.0.0.1.
const portalHost = "portal.acds.test"
