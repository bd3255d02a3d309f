package main

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// redactedPassword replaces a password wherever a URL is shown, as in
// url.URL.Redacted.
const redactedPassword = "xxxxx"

// redactURL returns the Redis URL raw with the password of its user
// information replaced by "xxxxx", as url.URL.Redacted does, and the
// values of query parameters named like a password too. It does so
// for a URL that does not parse too: everything from the first ':' after
// "scheme://" (or after the start, without a scheme) to the last '@' counts
// as the password. That hides more than the password when the path or the
// query holds an '@', never less. A URL without '@', or whose user
// information has no ':' (a user name alone), is returned unchanged.
func redactURL(raw string) string {
	return redactQuery(redactUserinfo(raw))
}

// redactQuery replaces the value of every query parameter whose name
// holds "password" (go-redis reads password and sentinel_password there
// in some versions) with "xxxxx".
func redactQuery(raw string) string {
	q := strings.IndexByte(raw, '?')
	if q < 0 {
		return raw
	}
	params := strings.Split(raw[q+1:], "&")
	for i, p := range params {
		if name, _, ok := strings.Cut(p, "="); ok && strings.Contains(strings.ToLower(name), "password") {
			params[i] = name + "=" + redactedPassword
		}
	}
	return raw[:q+1] + strings.Join(params, "&")
}

// redactUserinfo redacts the password of the user information.
func redactUserinfo(raw string) string {
	start := 0
	if i := strings.Index(raw, "://"); i > 0 && isScheme(raw[:i]) {
		start = i + len("://")
	}
	at := strings.LastIndexByte(raw[start:], '@')
	if at < 0 {
		return raw
	}
	userinfo := raw[start : start+at]
	colon := strings.IndexByte(userinfo, ':')
	if colon < 0 {
		return raw
	}
	return raw[:start] + userinfo[:colon+1] + redactedPassword + raw[start+at:]
}

// isScheme reports whether s is a URL scheme (RFC 3986: a letter, then
// letters, digits, '+', '-' or '.').
func isScheme(s string) bool {
	for i, r := range s {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
		case i > 0 && ('0' <= r && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// badURL is the error for a --redis URL that go-redis cannot parse. The
// errors of go-redis and net/url may quote the whole URL, password
// included, so none of their text about raw is shown: the reason given is
// the one for the redacted URL. When the redacted URL parses, the password
// itself broke the URL, and the error says what to do about it.
func badURL(raw string) error {
	shown := redactURL(raw)
	_, err := redis.ParseURL(shown)
	var ue *url.Error
	switch {
	case err == nil:
		return fmt.Errorf("bad --redis URL %q: it does not parse (percent-encode any of : / ? # [ ] @ in the user name and password)", shown)
	case errors.As(err, &ue):
		return fmt.Errorf("bad --redis URL %q: %v", shown, ue.Err)
	default:
		return fmt.Errorf("bad --redis URL %q: %s", shown, strings.TrimPrefix(err.Error(), "redis: "))
	}
}

// parseRedisURL is redis.ParseURL that also takes an address without a
// scheme for redis://: host, host:port or host:port/db (as redis-cli's
// -h/-p users write it; the port defaults to 6379). Anything else without
// a scheme (a user name, a query, a socket path) is left to ParseURL,
// which refuses it.
func parseRedisURL(raw string) (*redis.Options, error) {
	if raw != "" && !strings.Contains(raw, "://") && !strings.ContainsAny(raw, "@?#") && !strings.HasPrefix(raw, "/") {
		raw = "redis://" + raw
	}
	return redis.ParseURL(raw)
}
