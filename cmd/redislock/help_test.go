package main

import (
	"strings"
	"testing"
)

// The help texts are wrapped at 80 columns: a line edited without
// rewrapping ran a paragraph into the next, or an example into the
// sentence after it.
func TestHelpTextsAreWrapped(t *testing.T) {
	for name, text := range map[string]string{
		"run": runHelp, "status": statusHelp, "list": listHelp,
		"reset": resetHelp, "reset-all": resetAllHelp, "check": checkHelp, "help": usage,
	} {
		for i, line := range strings.Split(text, "\n") {
			if n := len([]rune(line)); n > 80 && !strings.HasPrefix(line, "  {") { // a JSON example stays whole
				t.Errorf("%s --help, line %d: %d columns: %q", name, i+1, n, line)
			}
		}
	}
}

// Each command's --help fits a screen: at most 40 lines of at most 80
// columns, the flags a line each, before the exit codes and examples.
// (run's was 126 lines, with 40 lines of prose before its flags; that
// prose is docs/command.md now.)
func TestHelpFitsAScreen(t *testing.T) {
	for _, cmd := range []string{"run", "status", "list", "reset", "reset-all", "check"} {
		code, help, errOut := runCLI(t, cmd, "--help")
		if code != exitOK || errOut != "" {
			t.Fatalf("%s --help: exit %d, stderr %q; want 0, the help on stdout (redislock %s --help | less)", cmd, code, errOut, cmd)
		}
		if code, same, _ := runCLI(t, "help", cmd); code != exitOK || same != help {
			t.Errorf("redislock help %s: exit %d, %d bytes; want %s --help's", cmd, code, len(same), cmd)
		}
		lines := strings.Split(strings.TrimRight(help, "\n"), "\n")
		if len(lines) > 40 {
			t.Errorf("%s --help: %d lines, want at most 40", cmd, len(lines))
		}
		for i, line := range lines {
			if n := len([]rune(line)); n > 80 && !strings.HasPrefix(line, "  {") {
				t.Errorf("%s --help, line %d: %d columns: %q", cmd, i+1, n, line)
			}
		}
		flags := strings.Index(help, "\nFlags:\n")
		if flags < 0 || flags > 600 {
			t.Errorf("%s --help: the flags come at byte %d, want them after the summary (at most 600)", cmd, flags)
		}
		if strings.Contains(help, "short for --") {
			t.Errorf("%s --help lists a short form apart from its long one", cmd)
		}
	}
}
