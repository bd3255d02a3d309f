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
