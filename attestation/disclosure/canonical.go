package disclosure

import "unicode/utf8"

// canonical reports whether entry, valid JSON, is already what
// acds.OutputBytes would make of it, so that Parse can keep it as it is
// rather than validate and re-encode it (two passes and an allocation per
// string): no white space outside strings, valid UTF-8, and in strings only
// the minimal escapes OutputBytes writes (\" \\ \b \f \n \r \t, and
// \u00xx in lower-case hex for the other control characters). Numbers and
// literals are kept as written by OutputBytes too. false only means
// "re-encode": FuzzCanonical checks that true is never wrong.
func canonical(entry []byte) bool {
	if !utf8.Valid(entry) {
		return false
	}
	in := false // inside a string
	for i := 0; i < len(entry); i++ {
		c := entry[i]
		if !in {
			switch c {
			case ' ', '\t', '\n', '\r':
				return false
			case '"':
				in = true
			}
			continue
		}
		switch c {
		case '"':
			in = false
		case '\\':
			if i+1 >= len(entry) {
				return false
			}
			i++
			switch entry[i] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(entry) || entry[i+1] != '0' || entry[i+2] != '0' || !lowerHex(entry[i+4]) {
					return false
				}
				switch entry[i+3] {
				case '0':
					switch entry[i+4] {
					case '8', '9', 'a', 'c', 'd': // \b \t \n \f \r have short forms
						return false
					}
				case '1':
				default:
					return false
				}
				i += 4
			default:
				return false // \/ is not minimal
			}
		}
	}
	return !in
}

func lowerHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }
