package main

import (
	"net/url"
	"testing"
)

func TestRedactURL(t *testing.T) {
	tests := []struct{ raw, want string }{
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"redis://user@h:6379/0", "redis://user@h:6379/0"},
		{"redis://user:pw@h:6379/0", "redis://user:xxxxx@h:6379/0"},
		{"rediss://:pw@h:6379/0?dial_timeout=3s", "rediss://:xxxxx@h:6379/0?dial_timeout=3s"},
		{"unix://user:pw@/run/redis.sock?db=2", "unix://user:xxxxx@/run/redis.sock?db=2"},
		// URLs that do not parse: the password goes all the same.
		{"redis://user:pw@h:notaport/0", "redis://user:xxxxx@h:notaport/0"},
		{"redis://user:p/w@h:6379/0", "redis://user:xxxxx@h:6379/0"},
		{"redis://user:p@w@h:6379/0", "redis://user:xxxxx@h:6379/0"},
		{"redis://user:p:w@h", "redis://user:xxxxx@h"},
		{"user:pw@h:6379", "user:xxxxx@h:6379"},
		{"u:x://pw@h", "u:xxxxx@h"}, // "u:x" is no scheme
		// An '@' after the host hides more than the password, never less.
		{"redis://user:pw@h:6379/0?client_name=a@b", "redis://user:xxxxx@b"},
		// Passwords in the query.
		{"redis://h:6379/0?password=s3cret", "redis://h:6379/0?password=xxxxx"},
		{"redis://h/0?db=1&Password=s3cret&x=1", "redis://h/0?db=1&Password=xxxxx&x=1"},
		{"redis://h/0?sentinel_password=s3cret", "redis://h/0?sentinel_password=xxxxx"},
	}
	for _, tt := range tests {
		if got := redactURL(tt.raw); got != tt.want {
			t.Errorf("redactURL(%q) = %q, want %q", tt.raw, got, tt.want)
		}
		// Where net/url parses the URL and the '@' ends the user
		// information, it agrees.
		if u, err := url.Parse(tt.raw); err == nil && u.User != nil && u.RawQuery == "" && u.Scheme != "" && u.Opaque == "" {
			if got := redactURL(tt.raw); got != u.Redacted() {
				t.Errorf("redactURL(%q) = %q, url.Redacted says %q", tt.raw, got, u.Redacted())
			}
		}
	}
}
