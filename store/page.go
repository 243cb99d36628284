package store

// Pager gathers one page of ListRequests as a backend reads its rows,
// newest first, and decides where the page ends (Page.Limit and
// Page.MaxBytes), so that every backend ends pages at the same place. A
// backend queries Query rows, asks Room for each row it finds before it
// scans and decodes it, stops reading when Room says false (that row
// starts the next page; a backend whose driver would still read the rest
// of the result should cancel the query), and Adds each row it scanned:
//
//	g := store.NewPager(p)
//	rows := query(..., g.Query())
//	for rows.Next() && g.Room() {
//		g.Add(scan(rows))
//	}
//	items, next := g.Page()
type Pager struct {
	limit, maxBytes, bytes int
	rows                   []Request
	full, more             bool
}

// NewPager starts the page p selects.
func NewPager(p Page) *Pager {
	return &Pager{limit: ClampLimit(p.Limit), maxBytes: p.MaxBytes}
}

// Query is how many rows to query: the page size and one more, which
// tells whether a next page exists.
func (g *Pager) Query() int { return g.limit + 1 }

// Room reports whether the page takes another row. When it does not, the
// row the backend has just found starts the next page.
func (g *Pager) Room() bool {
	if g.full {
		g.more = true
		return false
	}
	return true
}

// Add puts r on the page.
func (g *Pager) Add(r Request) {
	g.rows = append(g.rows, r)
	g.bytes += len(r.Input) + len(r.Sealed) + len(r.Result) + len(r.Error)
	g.full = len(g.rows) >= g.limit || (g.maxBytes > 0 && g.bytes >= g.maxBytes)
}

// Short reports whether the page ended before Limit, at Page.MaxBytes:
// then rows the query returned are still to come after the one Room
// refused.
func (g *Pager) Short() bool { return g.full && len(g.rows) < g.limit }

// Page returns the page's requests and the cursor of the next page (""
// when there is none).
func (g *Pager) Page() ([]Request, string) {
	if !g.more || len(g.rows) == 0 {
		return g.rows, ""
	}
	last := g.rows[len(g.rows)-1]
	return g.rows, EncodeCursor(last.CreatedAt, last.ID)
}
