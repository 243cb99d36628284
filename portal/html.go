package portal

import (
	"strings"

	"golang.org/x/net/html"
)

// The login-page reader: enough of a portal's login, MFA and consent
// pages to drive them. It walks the page with the x/net/html tokenizer
// (which knows comments, raw-text elements such as <script>, character
// references and unquoted attributes) and keeps <form> elements with
// their <input>, <button> and <select> controls, and the values of
// data-error attributes. The page size is capped before it runs.

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

// attrs returns a tag's attributes by name, the first of duplicates.
func attrs(t html.Token) map[string]string {
	m := make(map[string]string, len(t.Attr))
	for _, a := range t.Attr {
		if _, dup := m[a.Key]; !dup && a.Namespace == "" {
			m[a.Key] = a.Val
		}
	}
	return m
}

// parseHTML extracts the forms of a page.
func parseHTML(doc string) *htmlPage {
	p := &htmlPage{}
	var form *htmlForm
	sel := -1 // index in form.controls of the open <select>
	z := html.NewTokenizer(strings.NewReader(doc))
	for {
		switch z.Next() {
		case html.ErrorToken: // io.EOF: a strings.Reader fails no other way
			return p
		case html.EndTagToken:
			switch z.Token().Data {
			case "form":
				form, sel = nil, -1
			case "select":
				sel = -1
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			t := z.Token()
			a := attrs(t)
			if v, ok := a["data-error"]; ok {
				p.errors = append(p.errors, v)
			}
			switch t.Data {
			case "form":
				form = &htmlForm{action: a["action"], method: strings.ToUpper(a["method"]), id: a["id"]}
				if form.method == "" {
					form.method = "GET"
				}
				p.forms = append(p.forms, form)
				sel = -1
			case "input", "button":
				if form == nil {
					continue
				}
				typ := strings.ToLower(a["type"])
				if typ == "" {
					typ = map[string]string{"input": "text", "button": "submit"}[t.Data]
				}
				form.controls = append(form.controls, htmlControl{tag: t.Data, typ: typ, name: a["name"], value: a["value"]})
			case "select":
				if form == nil {
					continue
				}
				form.controls = append(form.controls, htmlControl{tag: "select", name: a["name"]})
				sel = len(form.controls) - 1
			case "option":
				if form == nil || sel < 0 {
					continue
				}
				c := &form.controls[sel]
				if _, selected := a["selected"]; selected {
					c.options = append([]string{a["value"]}, c.options...)
				} else {
					c.options = append(c.options, a["value"])
				}
			}
		}
	}
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
