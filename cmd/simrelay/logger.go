package main

import (
	"io"
	"log/slog"
	"strings"
)

// secretKeys are log attribute names whose values never reach a log line.
var secretKeys = []string{"password", "token", "secret", "apikey", "api_key", "authorization", "cookie"}

func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: maskSecrets}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// maskSecrets replaces the value of any attribute whose name says it holds a secret.
func maskSecrets(_ []string, a slog.Attr) slog.Attr {
	k := strings.ToLower(a.Key)
	for _, s := range secretKeys {
		if strings.Contains(k, s) {
			return slog.String(a.Key, "***")
		}
	}
	return a
}
