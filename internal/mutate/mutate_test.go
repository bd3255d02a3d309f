package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
)

// The mutation list in the repository parses, every snippet is still found
// exactly once in the library, and every test regexp names tests that
// exist: a change to the library that moves a mutation's snippet fails
// here, in seconds, rather than in the slow audit.
func TestMutationListIsCurrent(t *testing.T) {
	const root = "../.."
	src, err := os.ReadFile(filepath.Join(root, ".ci", "mutations.txt"))
	if err != nil {
		t.Fatal(err)
	}
	muts, err := parse(string(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(muts) == 0 {
		t.Fatal("no mutations")
	}
	if err := checkSnippets(os.DirFS(root), muts); err != nil {
		t.Fatalf("%v\n(update .ci/mutations.txt to the changed code)", err)
	}
	testFunc := regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)
	for _, m := range muts {
		re := regexp.MustCompile(strings.SplitN(m.tests, "/", 2)[0])
		for _, pkg := range m.pkgs {
			files, _ := filepath.Glob(filepath.Join(root, pkg, "*_test.go"))
			found := false
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, name := range testFunc.FindAllStringSubmatch(string(b), -1) {
					found = found || re.MatchString(name[1])
				}
			}
			if !found {
				t.Errorf("mutation %s: test %q matches no test in %s", m.id, m.tests, pkg)
			}
		}
	}
}

func TestParse(t *testing.T) {
	muts, err := parse(`# a comment
mutation two-edits
why it breaks a promise
test ^TestA$
file a.go
<<<<
	x := 1
	y := 2
====
	x := 2
>>>>
file b.lua
<<<<
return 0
====
>>>>
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(muts) != 1 || len(muts[0].edits) != 2 || muts[0].pkgs[0] != "." {
		t.Fatalf("parse() = %+v", muts)
	}
	if e := muts[0].edits[0]; e.old != "\tx := 1\n\ty := 2" || e.new != "\tx := 2" {
		t.Fatalf("first edit = %+v", e)
	}
	if e := muts[0].edits[1]; e.file != "b.lua" || e.old != "return 0" || e.new != "" {
		t.Fatalf("second edit = %+v", e)
	}

	fsys := fstest.MapFS{"a.go": {Data: []byte("\tx := 1\n\ty := 2\n\tx := 1\n\ty := 2\n")}, "b.lua": {Data: []byte("return 0\n")}}
	if err := checkSnippets(fsys, muts); err == nil || !strings.Contains(err.Error(), "found 2 times") {
		t.Fatalf("checkSnippets() with a snippet found twice = %v", err)
	}

	for _, bad := range []string{
		"file a.go\n",                                           // before any mutation
		"mutation x\ntest ^T$\n",                                // no edit
		"mutation x\nfile a\n<<<<\nold\n====\nnew\n",            // not closed
		"mutation x\ntest ^T$\nfile a\n<<<<\n====\nnew\n>>>>\n", // empty original
		"mutation x\ntest ^T$\nfile a\n<<<<\no\n====\n>>>>\nmutation x\ntest ^T$\nfile a\n<<<<\no\n====\n>>>>\n", // twice
	} {
		if _, err := parse(bad); err == nil {
			t.Errorf("parse(%q) = nil error", bad)
		}
	}
}
