// The etcd client logs through zap; this bridge sends its entries to the
// System's slog.Logger, so that they are structured like ours. Debug
// entries are dropped (the client is chatty there); an info entry is
// logged at debug, since the client calls routine reconnection info.

package actors

import (
	"context"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapLogger returns a zap.Logger writing to log.
func zapLogger(log *slog.Logger) *zap.Logger { return zap.New(&slogCore{log: log}) }

// slogCore is a zapcore.Core that writes to a slog.Logger.
type slogCore struct {
	log   *slog.Logger
	attrs []slog.Attr
}

var _ zapcore.Core = (*slogCore)(nil)

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l >= zapcore.ErrorLevel:
		return slog.LevelError
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelDebug
}

func (c *slogCore) Enabled(l zapcore.Level) bool {
	return l > zapcore.DebugLevel && c.log.Enabled(context.Background(), slogLevel(l))
}

func (c *slogCore) With(fs []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log, attrs: append(append([]slog.Attr(nil), c.attrs...), attrsOf(fs)...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	attrs := append(append([]slog.Attr(nil), c.attrs...), attrsOf(fs)...)
	c.log.LogAttrs(context.Background(), slogLevel(e.Level), e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

// attrsOf turns zap fields into slog attributes.
func attrsOf(fs []zapcore.Field) []slog.Attr {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fs {
		f.AddTo(enc)
	}
	attrs := make([]slog.Attr, 0, len(enc.Fields))
	for k, v := range enc.Fields {
		attrs = append(attrs, slog.Any(k, v))
	}
	return attrs
}
