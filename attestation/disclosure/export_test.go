package disclosure

// UnsaltedRootForTest is the RFC 6962 tree head of data with empty salts.
func UnsaltedRootForTest(data [][]byte) [HashSize]byte {
	ls := make([][HashSize]byte, len(data))
	for i, d := range data {
		ls[i] = leafHash(nil, d)
	}
	return root(ls)
}

// RefDecodedForTest is Ref by encoding/json alone, the oracle of Ref.
func RefDecodedForTest(entry []byte) string { return refDecoded(entry) }

// CanonicalForTest is canonical, which Parse trusts to skip re-encoding.
func CanonicalForTest(entry []byte) bool { return canonical(entry) }
