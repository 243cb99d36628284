package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"testing"

	"github.com/acds-project/acds/store"
)

// TestDeadlineStoreWrapsEveryMethod: deadlineStore embeds store.Store, so
// a method added to the interface would pass through it without the
// deadline — silently. Every method but Close must be declared on
// *deadlineStore itself.
func TestDeadlineStoreWrapsEveryMethod(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "storehealth.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
			continue
		}
		if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); ok {
			if id, ok := star.X.(*ast.Ident); ok && id.Name == "deadlineStore" {
				declared[fn.Name.Name] = true
			}
		}
	}
	st := reflect.TypeOf((*store.Store)(nil)).Elem()
	for i := range st.NumMethod() {
		m := st.Method(i).Name
		if m != "Close" && !declared[m] {
			t.Errorf("store.Store.%s is not wrapped by deadlineStore: it runs without the store deadline", m)
		}
	}
}
