package portal

import (
	"html"
	"strings"
)

// A minimal HTML form reader, enough to drive a portal's login, MFA and
// consent pages: it finds <form> elements with their <input>, <button>
// and <select> controls, and elements carrying data-error. It is not a
// general HTML parser; the page size is capped before it runs.

type htmlForm struct {
	action, method, id string
	controls           []htmlControl
}

type htmlControl struct {
	tag, typ, name, value string
	options               []string // select: option values, selected first when marked
}

type htmlPage struct {
	forms  []*htmlForm
	errors []string // data-error attribute values
}

// parseAttrs parses the attributes of a tag body (after the name).
func parseAttrs(s string) map[string]string {
	attrs := map[string]string{}
	for {
		s = strings.TrimLeft(s, " \t\r\n/")
		if s == "" {
			return attrs
		}
		i := strings.IndexAny(s, " \t\r\n=/")
		if i < 0 {
			attrs[strings.ToLower(s)] = ""
			return attrs
		}
		name := strings.ToLower(s[:i])
		s = strings.TrimLeft(s[i:], " \t\r\n")
		if !strings.HasPrefix(s, "=") {
			attrs[name] = ""
			continue
		}
		s = strings.TrimLeft(s[1:], " \t\r\n")
		var val string
		switch {
		case strings.HasPrefix(s, `"`) || strings.HasPrefix(s, `'`):
			q := s[:1]
			end := strings.Index(s[1:], q)
			if end < 0 {
				val, s = s[1:], ""
			} else {
				val, s = s[1:1+end], s[2+end:]
			}
		default:
			end := strings.IndexAny(s, " \t\r\n")
			if end < 0 {
				val, s = s, ""
			} else {
				val, s = s[:end], s[end:]
			}
		}
		if _, dup := attrs[name]; !dup {
			attrs[name] = html.UnescapeString(val)
		}
	}
}

// parseHTML extracts the forms of a page.
func parseHTML(doc string) *htmlPage {
	p := &htmlPage{}
	var form *htmlForm
	var sel *htmlControl
	for {
		i := strings.IndexByte(doc, '<')
		if i < 0 {
			return p
		}
		doc = doc[i+1:]
		if strings.HasPrefix(doc, "!--") {
			end := strings.Index(doc, "-->")
			if end < 0 {
				return p
			}
			doc = doc[end+3:]
			continue
		}
		end := strings.IndexByte(doc, '>')
		if end < 0 {
			return p
		}
		tag := doc[:end]
		doc = doc[end+1:]
		closing := strings.HasPrefix(tag, "/")
		tag = strings.TrimPrefix(tag, "/")
		nameEnd := strings.IndexAny(tag, " \t\r\n/")
		if nameEnd < 0 {
			nameEnd = len(tag)
		}
		name := strings.ToLower(tag[:nameEnd])
		if closing {
			switch name {
			case "form":
				form, sel = nil, nil
			case "select":
				sel = nil
			}
			continue
		}
		attrs := parseAttrs(tag[nameEnd:])
		if v, ok := attrs["data-error"]; ok {
			p.errors = append(p.errors, v)
		}
		switch name {
		case "script", "style":
			// Skip raw text up to the closing tag.
			if k := indexASCIIFold(doc, "</"+name); k >= 0 {
				doc = doc[k:]
			}
		case "form":
			form = &htmlForm{action: attrs["action"], method: strings.ToUpper(attrs["method"]), id: attrs["id"]}
			if form.method == "" {
				form.method = "GET"
			}
			p.forms = append(p.forms, form)
		case "input", "button":
			if form == nil {
				continue
			}
			typ := strings.ToLower(attrs["type"])
			if typ == "" {
				typ = map[string]string{"input": "text", "button": "submit"}[name]
			}
			form.controls = append(form.controls, htmlControl{tag: name, typ: typ, name: attrs["name"], value: attrs["value"]})
		case "select":
			if form == nil {
				continue
			}
			form.controls = append(form.controls, htmlControl{tag: "select", name: attrs["name"]})
			sel = &form.controls[len(form.controls)-1]
		case "option":
			if sel == nil || form == nil {
				continue
			}
			// form.controls may have grown; find the select again.
			c := &form.controls[len(form.controls)-1]
			if _, selected := attrs["selected"]; selected {
				c.options = append([]string{attrs["value"]}, c.options...)
			} else {
				c.options = append(c.options, attrs["value"])
			}
		}
	}
}

// indexASCIIFold returns the byte index in s of the first match of the
// lower-case ASCII pattern sub, ignoring ASCII case, or -1. Unlike
// strings.ToLower, it never changes lengths (invalid UTF-8 stays as it
// is), so the index is valid in s.
func indexASCIIFold(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		j := 0
		for j < len(sub) {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != sub[j] {
				break
			}
			j++
		}
		if j == len(sub) {
			return i
		}
	}
	return -1
}

// has reports whether the form has a control matching pred.
func (f *htmlForm) has(pred func(htmlControl) bool) bool {
	for _, c := range f.controls {
		if pred(c) {
			return true
		}
	}
	return false
}
