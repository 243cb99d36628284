package portal

import (
	"strings"

	"golang.org/x/net/html"
)

// The login-page reader: enough of a portal's login, MFA, consent and
// sign-in chooser pages to drive them as a person with a browser would.
// It walks the page with the x/net/html tokenizer (which knows comments,
// raw-text elements such as <script>, character references and unquoted
// attributes) and keeps <form> elements with their <input>, <button>,
// <select> and <textarea> controls (also those placed in a form by a
// form="id" attribute), each control's label and a button's text; the
// links of the page with their text; the error messages it shows
// (data-error attributes, elements with role="alert" or an "error" class
// or id); how many scripts it has; and its visible text. The page size is
// capped before it runs, and so is everything it keeps.

type htmlForm struct {
	action, method, id string
	controls           []htmlControl
}

// htmlControl is one form control. For a button, text is its text
// content (or an input's value); label is the text of its <label>, or its
// aria-label.
type htmlControl struct {
	tag, typ, name, value, id string
	autocomplete, placeholder string
	inputmode                 string
	label, text               string
	checked, disabled         bool
	readonly                  bool
	formAction, formMethod    string
	options                   []string // select: option values, selected first when marked
}

type htmlLink struct {
	href, text string
}

type htmlPage struct {
	forms   []*htmlForm
	links   []htmlLink
	errors  []string // data-error values and the texts of error elements
	scripts int      // <script> elements
	text    string   // the visible text, whitespace collapsed, capped
}

// Caps on what one page may make the reader keep.
const (
	maxPageText    = 8 << 10
	maxElementText = 200
	maxLinks       = 256
	maxPageErrors  = 32
	maxOpenText    = 8 // elements whose text is being collected at once
	maxLabelled    = 4 // controls one <label> names
)

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

// voidElements have no end tag, so no text of their own.
var voidElements = map[string]bool{"area": true, "base": true, "br": true, "col": true, "embed": true, "hr": true,
	"img": true, "input": true, "link": true, "meta": true, "source": true, "track": true, "wbr": true}

// hiddenText elements hold no text a person reads.
var hiddenText = map[string]bool{"script": true, "style": true, "noscript": true, "title": true, "textarea": true}

// textSink collects the text of one open element until its end tag.
type textSink struct {
	tag   string
	depth int
	b     strings.Builder
	done  func(string)
	// labels are the controls inside a <label>, which its text names.
	labels []func() *htmlControl
}

// close hands the collected text to done and to the labelled controls.
func (s *textSink) close() {
	t := collapse(s.b.String(), maxElementText)
	if s.done != nil {
		s.done(t)
	}
	for _, get := range s.labels {
		if c := get(); c.label == "" {
			c.label = t
		}
	}
}

func (s *textSink) add(t string) {
	if s.b.Len() < maxElementText {
		s.b.WriteString(t)
		s.b.WriteByte(' ')
	}
}

func collapse(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		s = s[:max]
	}
	return s
}

// isErrorElement reports whether a tag shows an error message.
func isErrorElement(a map[string]string) bool {
	if r := strings.ToLower(a["role"]); r == "alert" || r == "alertdialog" {
		return true
	}
	for _, k := range []string{"class", "id"} {
		v := strings.ToLower(a[k])
		if strings.Contains(v, "error") || strings.Contains(v, "alert-danger") {
			return true
		}
	}
	return false
}

// pageReader is the state of one parseHTML.
type pageReader struct {
	p        *htmlPage
	form     int // index in p.forms of the open <form>, or -1
	sel      func() *htmlControl
	area     func() *htmlControl // the open <textarea>
	skip     string              // the open element whose text is not visible
	sinks    []*textSink
	text     strings.Builder
	labelFor map[string]string // <label for=id> texts
	orphans  []orphan
}

// orphan is a control outside its form, placed by a form="id" attribute.
type orphan struct {
	formID string
	c      *htmlControl
}

func (r *pageReader) open(tag string, done func(string)) {
	if len(r.sinks) < maxOpenText {
		r.sinks = append(r.sinks, &textSink{tag: tag, depth: 1, done: done})
	}
}

// control adds a control to the open form (or, with a form attribute, to
// the form it names) and returns its accessor; nil when it belongs to no
// form.
func (r *pageReader) control(a map[string]string, c htmlControl) func() *htmlControl {
	c.name, c.id = a["name"], a["id"]
	c.autocomplete = strings.ToLower(strings.TrimSpace(a["autocomplete"]))
	c.placeholder, c.inputmode = a["placeholder"], strings.ToLower(a["inputmode"])
	c.label = collapse(a["aria-label"], maxElementText)
	_, c.checked = a["checked"]
	_, c.disabled = a["disabled"]
	_, c.readonly = a["readonly"]
	c.formAction, c.formMethod = a["formaction"], strings.ToUpper(a["formmethod"])
	var get func() *htmlControl
	switch fid, ok := a["form"]; {
	case ok:
		o := orphan{formID: fid, c: &c}
		r.orphans = append(r.orphans, o)
		get = func() *htmlControl { return o.c }
	case r.form >= 0:
		f := r.p.forms[r.form]
		f.controls = append(f.controls, c)
		i := len(f.controls) - 1
		get = func() *htmlControl { return &f.controls[i] }
	default:
		return nil
	}
	// A <label> around the control names it.
	for _, s := range r.sinks {
		if s.tag == "label" && len(s.labels) < maxLabelled {
			s.labels = append(s.labels, get)
		}
	}
	return get
}

func (r *pageReader) finish() {
	for i := len(r.sinks) - 1; i >= 0; i-- {
		r.sinks[i].close()
	}
	for _, o := range r.orphans {
		for _, f := range r.p.forms {
			if f.id != "" && f.id == o.formID {
				f.controls = append(f.controls, *o.c)
				break
			}
		}
	}
	for _, f := range r.p.forms {
		for i := range f.controls {
			c := &f.controls[i]
			if l, ok := r.labelFor[c.id]; ok && c.id != "" && c.label == "" {
				c.label = l
			}
		}
	}
	r.p.text = collapse(r.text.String(), maxPageText)
}

func (r *pageReader) textToken(t string) {
	if r.skip != "" {
		if r.skip == "textarea" && r.area != nil {
			r.area().value = t
		}
		return
	}
	if r.text.Len() < maxPageText {
		r.text.WriteString(t)
		r.text.WriteByte(' ')
	}
	for _, s := range r.sinks {
		s.add(t)
	}
}

func (r *pageReader) endTag(name string) {
	if name == r.skip {
		r.skip, r.area = "", nil
	}
	for i := len(r.sinks) - 1; i >= 0; i-- {
		if s := r.sinks[i]; s.tag == name {
			if s.depth--; s.depth == 0 {
				s.close()
				r.sinks = append(r.sinks[:i], r.sinks[i+1:]...)
			}
			break
		}
	}
	switch name {
	case "form":
		r.form, r.sel = -1, nil
	case "select":
		r.sel = nil
	}
}

func (r *pageReader) startTag(t html.Token) {
	p := r.p
	a := attrs(t)
	if v, ok := a["data-error"]; ok && len(p.errors) < maxPageErrors {
		p.errors = append(p.errors, collapse(v, maxElementText))
	}
	for _, s := range r.sinks {
		if s.tag == t.Data {
			s.depth++
		}
	}
	if hiddenText[t.Data] {
		r.skip = t.Data
	}
	if !voidElements[t.Data] && isErrorElement(a) {
		r.open(t.Data, func(s string) {
			if s != "" && len(p.errors) < maxPageErrors {
				p.errors = append(p.errors, s)
			}
		})
	}
	switch t.Data {
	case "script":
		p.scripts++
	case "form":
		f := &htmlForm{action: a["action"], method: strings.ToUpper(a["method"]), id: a["id"]}
		if f.method == "" {
			f.method = "GET"
		}
		p.forms = append(p.forms, f)
		r.form, r.sel = len(p.forms)-1, nil
	case "a":
		href, ok := a["href"]
		if !ok || len(p.links) >= maxLinks {
			return
		}
		p.links = append(p.links, htmlLink{href: href, text: collapse(a["aria-label"], maxElementText)})
		i := len(p.links) - 1
		r.open("a", func(s string) {
			if p.links[i].text == "" {
				p.links[i].text = s
			}
		})
	case "label":
		id := a["for"]
		r.open("label", func(s string) {
			if _, dup := r.labelFor[id]; id != "" && !dup {
				r.labelFor[id] = s
			}
		})
	case "input":
		typ := strings.ToLower(a["type"])
		if typ == "" {
			typ = "text"
		}
		c := htmlControl{tag: "input", typ: typ, value: a["value"]}
		if typ == "submit" || typ == "button" || typ == "image" {
			c.text = collapse(a["value"], maxElementText)
		}
		r.control(a, c)
	case "button":
		typ := strings.ToLower(a["type"])
		if typ == "" {
			typ = "submit"
		}
		if get := r.control(a, htmlControl{tag: "button", typ: typ, value: a["value"]}); get != nil {
			r.open("button", func(s string) {
				if c := get(); c.text == "" {
					c.text = s
				}
			})
		}
	case "textarea":
		r.area = r.control(a, htmlControl{tag: "textarea", typ: "textarea"})
	case "select":
		r.sel = r.control(a, htmlControl{tag: "select", typ: "select"})
	case "option":
		if r.sel == nil {
			return
		}
		c := r.sel()
		if _, selected := a["selected"]; selected {
			c.options = append([]string{a["value"]}, c.options...)
		} else {
			c.options = append(c.options, a["value"])
		}
	}
}

// parseHTML reads a page.
func parseHTML(doc string) *htmlPage {
	r := &pageReader{p: &htmlPage{}, form: -1, labelFor: map[string]string{}}
	z := html.NewTokenizer(strings.NewReader(doc))
	for {
		switch z.Next() {
		case html.ErrorToken: // io.EOF: a strings.Reader fails no other way
			r.finish()
			return r.p
		case html.TextToken:
			r.textToken(string(z.Text()))
		case html.EndTagToken:
			r.endTag(z.Token().Data)
		case html.StartTagToken, html.SelfClosingTagToken:
			r.startTag(z.Token())
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
