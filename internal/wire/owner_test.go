package wire

import (
	"strings"
	"testing"
)

func TestParseOwner(t *testing.T) {
	u := "db3734ce-9c56-4914-8db7-3cf6873f1e1f"
	for _, c := range []struct {
		id   string
		want Owner
		ok   bool
	}{
		{"web-1:8587:" + u, Owner{Host: "web-1", PID: 8587}, true},
		{"a.b_c-d:1:" + u, Owner{Host: "a.b_c-d", PID: 1}, true},
		{"x:y:8587:" + u, Owner{Host: "x:y", PID: 8587}, true}, // the host is what is left
		{u, Owner{}, false}, // a bare UUID
		{"worker-1", Owner{}, false},
		{":8587:" + u, Owner{}, false},  // no host
		{"web:0:" + u, Owner{}, false},  // no pid 0
		{"web:-1:" + u, Owner{}, false}, // nor negative
		{"web:01:" + u, Owner{}, false}, // nor padded
		{"web:8587:" + u[:35], Owner{}, false},
		{"web:8587:" + strings.ToUpper(u) + "x", Owner{}, false},
		{"web:8587:zzzzzzzz-9c56-4914-8db7-3cf6873f1e1f", Owner{}, false},
	} {
		got, ok := ParseOwner(c.id)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseOwner(%q) = %+v, %v; want %+v, %v", c.id, got, ok, c.want, c.ok)
		}
	}
}
