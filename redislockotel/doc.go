// Package redislockotel reports the events of redislock Locks to
// OpenTelemetry: metrics and spans.
package redislockotel
