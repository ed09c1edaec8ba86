package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReadAdminTokens: the admin token file holds one token per line, each
// at least 16 and at most 4096 bytes of visible ASCII; a file that breaks
// a rule is refused naming the file, the line and the rule, never the
// token.
func TestReadAdminTokens(t *testing.T) {
	t.Parallel()
	long := "0123456789abcdef" // 16 bytes
	tests := []struct {
		name, content string
		want          []string // the tokens
		says          string   // what the error says
	}{
		{"one", long + "\n", []string{long}, ""},
		{"two, blank lines and spaces around", "\n  " + long + "x \r\n\n" + long + "\n", []string{long + "x", long}, ""},
		{"4096 bytes", strings.Repeat("t", 4096), []string{strings.Repeat("t", 4096)}, ""},
		{"15 bytes", long[:15], nil, "line 1, holds a token of 15 bytes; it must be at least 16 bytes"},
		{"a short second token", long + "\n\nshort-token\n", nil, "line 3, holds a token of 11 bytes"},
		{"4097 bytes", strings.Repeat("t", 4097), nil, "line 1, holds a token of 4097 bytes; it must be at most 4096 bytes"},
		{"a space inside", "0123456789 abcdef", nil, "visible ASCII characters only"},
		{"not ASCII", long + "é", nil, "visible ASCII characters only"},
		{"a control character", long + "\x7f", nil, "visible ASCII characters only"},
		{"none", " \n\n", nil, "holds no token (only white space)"},
	}
	log := slog.New(slog.DiscardHandler)
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := defaults
		cfg.adminTokenFile = path
		r, err := readAdminTokens(&cfg, time.Now, log)
		switch {
		case tt.says == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.says == "" && !slices.Equal(secretsOf(r)(), tt.want):
			t.Errorf("%s: got %d tokens, want %d", tt.name, len(secretsOf(r)()), len(tt.want))
		case tt.says != "" && (err == nil || !strings.HasPrefix(err.Error(), "admin token: "+path) || !strings.Contains(err.Error(), tt.says)):
			t.Errorf("%s: got %v; want an error naming %s and saying %q", tt.name, err, path, tt.says)
		case tt.says != "" && strings.Contains(err.Error(), long):
			t.Errorf("%s: the error shows the token: %v", tt.name, err)
		}
	}
	cfg := defaults
	if r, err := readAdminTokens(&cfg, time.Now, log); err != nil || secretsOf(r) != nil {
		t.Errorf("without --admin-token-file: got %v, %v; want no tokens", r, err)
	}
}
