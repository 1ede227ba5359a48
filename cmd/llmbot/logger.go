package main

import (
	"io"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newLogger builds the one logger of the process, writing to w. format is "json", "console" or
// "" (json unless w is a terminal).
func newLogger(w io.Writer, level zapcore.Level, format string) *zap.Logger {
	if format == "" {
		format = "json"
		if isTerminal(w) {
			format = "console"
		}
	}
	var enc zapcore.Encoder
	if format == "console" {
		ec := zap.NewDevelopmentEncoderConfig()
		ec.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		enc = zapcore.NewConsoleEncoder(ec)
	} else {
		ec := zap.NewProductionEncoderConfig()
		ec.TimeKey = "time" // not "ts": that is a Slack message's timestamp in our fields
		ec.EncodeTime = zapcore.RFC3339NanoTimeEncoder
		ec.EncodeDuration = zapcore.MillisDurationEncoder
		enc = zapcore.NewJSONEncoder(ec)
	}
	core := zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), level)
	return zap.New(core, zap.ErrorOutput(zapcore.Lock(zapcore.AddSync(w))))
}

// isTerminal reports whether w is a character device (a terminal), without a dependency.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
