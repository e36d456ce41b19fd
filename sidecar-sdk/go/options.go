package kplug

import (
	"fmt"
	"log/slog"
	"time"
)

// Option configures a plugin server; see [NewServer]. Options win over the
// environment.
type Option func(*config) error

type config struct {
	socketDir         string
	heartbeatInterval time.Duration
	grace             time.Duration
	logger            *slog.Logger
}

// WithSocketDir sets the socket dir shared with the operator, instead of
// $KPLUG_SOCKET_DIR (default /var/run/kplug).
func WithSocketDir(dir string) Option {
	return func(c *config) error {
		if dir == "" {
			return &startupError{kind: ErrInvalidConfig, message: "WithSocketDir: the socket dir is empty"}
		}
		c.socketDir = dir
		return nil
	}
}

// WithHeartbeatInterval sets the heartbeat interval until the operator asks
// for another one, instead of $KPLUG_HEARTBEAT_INTERVAL (default 5 s).
func WithHeartbeatInterval(interval time.Duration) Option {
	return func(c *config) error {
		if interval <= 0 {
			return &startupError{kind: ErrInvalidConfig, message: fmt.Sprintf(
				"WithHeartbeatInterval(%v): the heartbeat interval must be positive", interval)}
		}
		c.heartbeatInterval = interval
		return nil
	}
}

// WithGracePeriod sets how long calls in flight may take to finish at
// shutdown (default 10 s); 0 stops them at once.
func WithGracePeriod(grace time.Duration) Option {
	return func(c *config) error {
		if grace < 0 {
			return &startupError{kind: ErrInvalidConfig, message: fmt.Sprintf(
				"WithGracePeriod(%v): the grace period must not be negative", grace)}
		}
		c.grace = grace
		return nil
	}
}

// WithLogger sets the logger (default [slog.Default]). The SDK logs state
// changes at Info (serving, registered, shutting down), problems at Warn
// and Error, and every heartbeat retry at Debug; every record carries the
// plugin's name.
func WithLogger(logger *slog.Logger) Option {
	return func(c *config) error {
		if logger == nil {
			return &startupError{kind: ErrInvalidConfig, message: "WithLogger: the logger is nil"}
		}
		c.logger = logger
		return nil
	}
}
