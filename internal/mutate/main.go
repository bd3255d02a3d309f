// Command mutate runs the mutation list of .ci/mutations.txt: for each
// mutation (a deliberate bug written as exact snippet replacements in the
// library's files) it runs the tests that must catch it and reports whether
// they did. It works on a copy of the module in a temporary directory and
// never changes the tree it is run from.
//
// Run it from the module root with .ci/mutations; see RELIABILITY.md.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	listFile := flag.String("list", ".ci/mutations.txt", "the mutation list")
	only := flag.String("only", "", "comma-separated mutation ids to run (default: all)")
	check := flag.Bool("check", false, "only check that every snippet is found exactly once, run nothing")
	verbose := flag.Bool("v", false, "print the test output of every mutation that was not caught")
	keep := flag.Bool("keep", false, "keep the temporary copy of the module")
	timeout := flag.Duration("timeout", 5*time.Minute, "go test -timeout of each run")
	flag.Parse()
	if err := run(*listFile, *only, *check, *verbose, *keep, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
}

func run(listFile, only string, checkOnly, verbose, keep bool, timeout time.Duration) error {
	src, err := os.ReadFile(listFile)
	if err != nil {
		return err
	}
	muts, err := parse(string(src))
	if err != nil {
		return fmt.Errorf("%s: %w", listFile, err)
	}
	if only != "" {
		if muts, err = selectIDs(muts, strings.Split(only, ",")); err != nil {
			return err
		}
	}
	if err := checkSnippets(os.DirFS("."), muts); err != nil {
		return err
	}
	if checkOnly {
		fmt.Printf("%d mutations: every snippet found exactly once\n", len(muts))
		return nil
	}

	start := time.Now()
	dir, err := os.MkdirTemp("", "redislock-mutants-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Println("copy of the module:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	if err := copyTree(".", dir); err != nil {
		return err
	}

	// The unmutated tree must pass every test named, or a caught mutation
	// proves nothing.
	fmt.Printf("baseline: the unmutated copy runs the %d mutations' tests\n", len(muts))
	base := goTest(dir, unionPkgs(muts), unionRuns(muts), timeout)
	if base.status != passed {
		fmt.Println(base.output)
		return fmt.Errorf("baseline: the unmutated tree fails its tests (%s, %v)", base.status, base.took.Round(time.Second))
	}
	fmt.Printf("baseline: PASS in %v\n\n", base.took.Round(time.Second))

	var missed []string
	for _, m := range muts {
		restore, err := m.apply(dir)
		if err != nil {
			return err
		}
		r := goTest(dir, m.pkgs, m.tests, timeout)
		if err := restore(); err != nil {
			return err
		}
		verdict := map[status]string{failed: "CAUGHT", passed: "MISSED", broken: "BUILD-FAILED"}[r.status]
		detail := strings.Join(r.failing, " ")
		if r.status != failed {
			missed = append(missed, m.id)
			detail = m.why
		}
		fmt.Printf("%-13s %-32s %6v  %s\n", verdict, m.id, r.took.Round(100*time.Millisecond), detail)
		if verbose && r.status != failed {
			fmt.Println(r.output)
		}
	}
	fmt.Printf("\n%d mutations, %d caught, %d not caught; total %v\n", len(muts), len(muts)-len(missed), len(missed), time.Since(start).Round(time.Second))
	if len(missed) > 0 {
		return fmt.Errorf("not caught: %s", strings.Join(missed, ", "))
	}
	return nil
}

func selectIDs(muts []mutation, ids []string) ([]mutation, error) {
	byID := map[string]mutation{}
	for _, m := range muts {
		byID[m.id] = m
	}
	var out []mutation
	for _, id := range ids {
		m, ok := byID[strings.TrimSpace(id)]
		if !ok {
			return nil, fmt.Errorf("no mutation %q", id)
		}
		out = append(out, m)
	}
	return out, nil
}

// unionRuns is a -run regexp that runs the tests of every mutation.
func unionRuns(muts []mutation) string {
	var parts []string
	seen := map[string]bool{}
	for _, m := range muts {
		if !seen[m.tests] {
			seen[m.tests] = true
			parts = append(parts, "(?:"+m.tests+")")
		}
	}
	return strings.Join(parts, "|")
}

func unionPkgs(muts []mutation) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range muts {
		for _, p := range m.pkgs {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out
}

type status int

const (
	passed status = iota
	failed        // a test failed: the mutation was caught
	broken        // it did not build
)

func (s status) String() string { return [...]string{"pass", "fail", "build failed"}[s] }

type result struct {
	status  status
	failing []string // top-level tests that failed
	took    time.Duration
	output  string
}

// goTest runs the tests that match run in pkgs of the module in dir.
func goTest(dir string, pkgs []string, run string, timeout time.Duration) result {
	args := append([]string{"test", "-count=1", "-timeout", timeout.String(), "-run", run}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	// CI=true: a test that needs redis-server fails rather than skips.
	cmd.Env = append(os.Environ(), "CI=true")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	r := result{took: time.Since(start), output: string(out)}
	for _, line := range strings.Split(r.output, "\n") {
		if name, ok := strings.CutPrefix(line, "--- FAIL: "); ok {
			r.failing = append(r.failing, strings.Fields(name)[0])
		}
		if strings.HasPrefix(line, "panic: test timed out") {
			r.failing = append(r.failing, "(timeout)")
		}
	}
	switch {
	case err == nil:
		r.status = passed
	case strings.Contains(r.output, "[build failed]") || strings.Contains(r.output, "[setup failed]"):
		r.status = broken
	default:
		r.status = failed
		if len(r.failing) == 0 {
			r.failing = []string{"(go test: " + err.Error() + ")"}
		}
	}
	return r
}

// copyTree copies the module at src into dst, without .git.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		target := filepath.Join(dst, path)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}
