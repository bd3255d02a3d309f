package redislock_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// The surface stays small (issue 30): at most 130 exported identifiers in
// the root package as go/doc sees them (funcs, types, methods, vars and
// consts; fields not counted), and a README of at most 400 lines, the rest
// in docs/. An addition past either says what to take away first.
func TestSurfaceStaysSmall(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	values := func(vs []*doc.Value) (n int) {
		for _, v := range vs {
			for _, s := range v.Decl.Specs {
				for _, id := range s.(*ast.ValueSpec).Names {
					if id.IsExported() {
						n++
					}
				}
			}
		}
		return n
	}
	n := 0
	for _, p := range pkgs {
		d := doc.New(p, "redislock", 0)
		n += len(d.Funcs) + values(d.Vars) + values(d.Consts)
		for _, typ := range d.Types {
			n += 1 + len(typ.Funcs) + len(typ.Methods) + values(typ.Vars) + values(typ.Consts)
		}
	}
	if n > 130 {
		t.Errorf("%d exported identifiers in the root package; at most 130", n)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(readme), "\n"); lines > 400 {
		t.Errorf("README.md has %d lines; at most 400 (the rest goes in docs/)", lines)
	}
}
