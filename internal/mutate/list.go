package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// A mutation is one deliberate bug: edits to the library's files, and the
// tests (a go test -run regexp) of which at least one must then fail.
type mutation struct {
	id    string
	why   string   // the promise it breaks
	tests string   // -run regexp
	pkgs  []string // packages to test; default "."
	edits []edit
}

// An edit replaces the one occurrence of old in file with new.
type edit struct {
	file     string // slash-separated, relative to the module root
	old, new string
}

// parse reads a mutation list. Outside snippets, blank lines and lines
// starting with # are ignored, and each line is a keyword and its value:
//
//	mutation <id>       starts a mutation
//	why <text>          what promise it breaks
//	test <regexp>       the go test -run regexp that must catch it
//	pkg <pattern>       a package to test (repeatable; default ".")
//	file <path>         an edit of that file; the snippet block follows:
//	<<<<
//	the original text, exactly (may span lines)
//	====
//	its replacement (may be empty)
//	>>>>
func parse(src string) ([]mutation, error) {
	var (
		muts []mutation
		cur  *mutation
	)
	sc := bufio.NewScanner(strings.NewReader(src))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	line := 0
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		line++
		return sc.Text(), true
	}
	for {
		text, ok := next()
		if !ok {
			break
		}
		trimmed := strings.TrimSpace(text)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		key, value, _ := strings.Cut(trimmed, " ")
		value = strings.TrimSpace(value)
		if key != "mutation" && cur == nil {
			return nil, fmt.Errorf("line %d: %q before the first mutation", line, key)
		}
		switch key {
		case "mutation":
			muts = append(muts, mutation{id: value})
			cur = &muts[len(muts)-1]
		case "why":
			cur.why = value
		case "test":
			cur.tests = value
		case "pkg":
			cur.pkgs = append(cur.pkgs, value)
		case "file":
			e := edit{file: value}
			if t, _ := next(); t != "<<<<" {
				return nil, fmt.Errorf("line %d: want <<<< after file", line)
			}
			var old, rep []string
			for part := &old; ; {
				t, ok := next()
				if !ok {
					return nil, fmt.Errorf("line %d: snippet not closed with >>>>", line)
				}
				if t == "====" && part == &old {
					part = &rep
					continue
				}
				if t == ">>>>" && part == &rep {
					break
				}
				*part = append(*part, t)
			}
			e.old, e.new = strings.Join(old, "\n"), strings.Join(rep, "\n")
			if e.old == "" {
				return nil, fmt.Errorf("line %d: empty original snippet", line)
			}
			cur.edits = append(cur.edits, e)
		default:
			return nil, fmt.Errorf("line %d: unknown keyword %q", line, key)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for i := range muts {
		m := &muts[i]
		switch {
		case m.id == "" || strings.ContainsAny(m.id, " ,"):
			return nil, fmt.Errorf("mutation %q: bad id", m.id)
		case seen[m.id]:
			return nil, fmt.Errorf("mutation %q: listed twice", m.id)
		case m.tests == "":
			return nil, fmt.Errorf("mutation %q: no test", m.id)
		case len(m.edits) == 0:
			return nil, fmt.Errorf("mutation %q: no edit", m.id)
		}
		if _, err := regexp.Compile(m.tests); err != nil {
			return nil, fmt.Errorf("mutation %q: %w", m.id, err)
		}
		if len(m.pkgs) == 0 {
			m.pkgs = []string{"."}
		}
		seen[m.id] = true
	}
	return muts, nil
}

// checkSnippets reports every edit whose original text is not found
// exactly once in its file of root (the library was changed since the
// list was written: the mutation must be brought up to date).
func checkSnippets(root fs.FS, muts []mutation) error {
	var errs []error
	for _, m := range muts {
		for _, e := range m.edits {
			b, err := fs.ReadFile(root, e.file)
			if err != nil {
				errs = append(errs, fmt.Errorf("mutation %s: %w", m.id, err))
				continue
			}
			if n := strings.Count(string(b), e.old); n != 1 {
				errs = append(errs, fmt.Errorf("mutation %s: %s: the original snippet is found %d times, want exactly once:\n%s", m.id, e.file, n, e.old))
			}
		}
	}
	return errors.Join(errs...)
}

// apply makes m's edits in the module copy at dir and returns a function
// that puts the files back.
func (m mutation) apply(dir string) (restore func() error, err error) {
	saved := map[string][]byte{}
	restore = func() error {
		var errs []error
		for path, b := range saved {
			errs = append(errs, os.WriteFile(path, b, 0o644))
		}
		return errors.Join(errs...)
	}
	for _, e := range m.edits {
		path := filepath.Join(dir, filepath.FromSlash(e.file))
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, errors.Join(err, restore())
		}
		if _, ok := saved[path]; !ok {
			saved[path] = b
		}
		if n := strings.Count(string(b), e.old); n != 1 {
			return nil, errors.Join(fmt.Errorf("mutation %s: %s: original found %d times", m.id, e.file, n), restore())
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(b), e.old, e.new, 1)), 0o644); err != nil {
			return nil, errors.Join(err, restore())
		}
	}
	return restore, nil
}
