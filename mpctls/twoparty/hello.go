package twoparty

import (
	"golang.org/x/crypto/cryptobyte"

	"github.com/acds-project/acds/mpctls"
)

// The suites MPC mode computes: the key schedule must be SHA-256 (the
// engine's hash), and a TLS 1.2 server Finished is checked with AES-128
// in two-party computation. TLS 1.3 ChaCha20-Poly1305 needs no cipher in
// two-party computation (server records are read after their keys are
// revealed), so it is offered.
var (
	suites13 = []uint16{0x1301, 0x1303} // TLS_AES_128_GCM_SHA256, TLS_CHACHA20_POLY1305_SHA256
	suites12 = []uint16{0xc02b, 0xc02f} // ECDHE_{ECDSA,RSA}_WITH_AES_128_GCM_SHA256
)

// groupP256 is secp256r1, the only group the engine computes.
const groupP256 = 23

// Supported reports whether MPC mode computes suite id of version.
func Supported(version, id uint16) bool {
	list := suites12
	if version == mpctls.VersionTLS13 {
		list = suites13
	}
	for _, s := range list {
		if s == id {
			return true
		}
	}
	return false
}

// signatureSchemes are the server signatures the client accepts, as
// mpctls.VerifyHandshake checks them.
var signatureSchemes = []uint16{
	0x0403, 0x0503, 0x0603, // ecdsa_secp{256,384,521}r1_sha{256,384,512}
	0x0804, 0x0805, 0x0806, // rsa_pss_rsae_sha{256,384,512}
	0x0807,                 // ed25519
	0x0401, 0x0501, 0x0601, // rsa_pkcs1_sha{256,384,512} (TLS 1.2 only)
}

// clientHello builds the ClientHello handshake message: only suites (of
// those above) for the versions offered, only secp256r1 with the one key
// share share, HTTP/1.1, the
// extended master secret, no session id, no tickets and no
// psk_key_exchange_modes (so that a TLS 1.3 server sends no tickets).
func clientHello(random []byte, serverName string, share []byte, suites []uint16, min, max uint16) []byte {
	var b cryptobyte.Builder
	b.AddUint8(1) // client_hello
	b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint16(mpctls.VersionTLS12)
		b.AddBytes(random)
		b.AddUint8(0) // legacy_session_id
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			for _, s := range suites {
				if max >= mpctls.VersionTLS13 && Supported(mpctls.VersionTLS13, s) || min <= mpctls.VersionTLS12 && Supported(mpctls.VersionTLS12, s) {
					b.AddUint16(s)
				}
			}
		})
		b.AddUint8(1) // compression methods: null
		b.AddUint8(0)
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			ext := func(typ uint16, body func(*cryptobyte.Builder)) {
				b.AddUint16(typ)
				b.AddUint16LengthPrefixed(body)
			}
			ext(0, func(b *cryptobyte.Builder) { // server_name
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint8(0)
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(serverName)) })
				})
			})
			ext(10, func(b *cryptobyte.Builder) { // supported_groups
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint16(groupP256) })
			})
			ext(13, func(b *cryptobyte.Builder) { // signature_algorithms
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					for _, s := range signatureSchemes {
						b.AddUint16(s)
					}
				})
			})
			ext(16, func(b *cryptobyte.Builder) { // ALPN
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte("http/1.1")) })
				})
			})
			if min <= mpctls.VersionTLS12 {
				ext(11, func(b *cryptobyte.Builder) { // ec_point_formats: uncompressed
					b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint8(0) })
				})
				ext(23, func(*cryptobyte.Builder) {})     // extended_master_secret
				ext(0xff01, func(b *cryptobyte.Builder) { // renegotiation_info, empty
					b.AddUint8(0)
				})
			}
			ext(43, func(b *cryptobyte.Builder) { // supported_versions
				b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) {
					if max >= mpctls.VersionTLS13 {
						b.AddUint16(mpctls.VersionTLS13)
					}
					if min <= mpctls.VersionTLS12 {
						b.AddUint16(mpctls.VersionTLS12)
					}
				})
			})
			if max >= mpctls.VersionTLS13 {
				ext(51, func(b *cryptobyte.Builder) { // key_share
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
						b.AddUint16(groupP256)
						b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(share) })
					})
				})
			}
		})
	})
	return b.BytesOrPanic()
}
