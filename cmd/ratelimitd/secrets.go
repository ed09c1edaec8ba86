package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"
)

// The secrets' files: the admin token's (--admin-token-file) and the Redis
// password's (--redis-password-file). Each holds one secret per line, any
// of which is accepted, so that a rotation can accept the old and the new
// one while the clients move over. A file is read at start, where a file
// group or others may access, or a secret the rules refuse, stops the
// daemon; it is looked at again when a secret is asked for (a request, an
// AUTH), at most once per fileCheckInterval, and read again when it
// changed (see reloading): a new content the start would refuse keeps the
// last good secrets, logged.

// minTokenBytes is the shortest admin token accepted: 16 random bytes are
// beyond guessing, a short word is not.
const minTokenBytes = 16

// maxTokenBytes is the longest admin token accepted (the admin API's and
// the dashboard's limit).
const maxTokenBytes = 4096

// maxTokenFileBytes bounds what is read of a secret's file.
const maxTokenFileBytes = 64 << 10

// secretFile describes a file of secrets for loadSecrets.
type secretFile struct {
	flag, path string
	what       string // the secret's name, in errors and logs: "admin token"
	noun       string // one of them, in errors: "token"
	none       string // what an error adds when the file holds none
	// check, if not nil, refuses a secret; its error names the rule, never
	// the secret.
	check func(s string) error
}

// loadSecrets reads f (see the comment above), returning an error that
// names the file (and, for a secret it refuses, its line and the rule) when
// it cannot; reloads log to log, and are looked for by clock.
func loadSecrets(f secretFile, clock func() time.Time, log *slog.Logger) (*reloading[[]string], error) {
	r := &reloading[[]string]{
		files: []tlsFile{{name: "--" + f.flag, path: f.path}},
		load: func(data [][]byte) (*[]string, error) {
			var secrets []string
			n := 0
			for line := range strings.Lines(string(data[0])) {
				n++
				s := strings.TrimSpace(line)
				if s == "" {
					continue
				}
				if f.check != nil {
					if err := f.check(s); err != nil {
						return nil, fmt.Errorf("%s: %s, line %d, holds %w", f.what, f.path, n, err)
					}
				}
				secrets = append(secrets, s)
			}
			if len(secrets) == 0 {
				return nil, fmt.Errorf("%s: %s holds no %s (only white space); %s", f.what, f.path, f.noun, f.none)
			}
			return &secrets, nil
		},
		describe: func(s *[]string) []any { return []any{"count", len(*s)} },
		readFile: func(tf tlsFile) ([]byte, error) { return readSecretFile(f.what, tf.path) },
		clock:    clock,
		log:      log,
		failMsg:  f.what + " file reload failed; keeping the last good ones",
		okMsg:    f.what + " file reloaded",
	}
	if err := r.start(); err != nil {
		return nil, err
	}
	return r, nil
}

// readSecretFile reads the file path of the secret what (its name in
// errors), at most maxTokenFileBytes of it. Like ssh with a private key,
// it refuses a file that group or others may access (any of the mode bits
// 077), naming the file and what is wrong.
func readSecretFile(what, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	// The mode of the file opened, not of the path, so a swap in between
	// cannot slip past the check.
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%s: %s is accessible by group or others (mode %04o); a secret must be readable by its owner only: chmod 600 %s", what, path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFileBytes))
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", what, path, err)
	}
	return b, nil
}

// readAdminTokens reads --admin-token-file: its tokens are at least
// minTokenBytes and at most maxTokenBytes of visible ASCII (no spaces).
// It returns nil without the flag.
func readAdminTokens(cfg *config, clock func() time.Time, log *slog.Logger) (*reloading[[]string], error) {
	if cfg.adminTokenFile == "" {
		return nil, nil
	}
	return loadSecrets(secretFile{
		flag: "admin-token-file", path: cfg.adminTokenFile, what: "admin token", noun: "token",
		none: "write a token of at least 16 bytes in it (for example 32 random bytes in hex: openssl rand -hex 32)",
		check: func(tok string) error {
			switch {
			case len(tok) < minTokenBytes:
				return fmt.Errorf("a token of %d bytes; it must be at least %d bytes (for example 32 random bytes in hex: openssl rand -hex 32)", len(tok), minTokenBytes)
			case len(tok) > maxTokenBytes:
				return fmt.Errorf("a token of %d bytes; it must be at most %d bytes", len(tok), maxTokenBytes)
			}
			for i := 0; i < len(tok); i++ {
				if c := tok[i]; c <= ' ' || c > '~' {
					return fmt.Errorf("a token with a character other than visible ASCII (a space inside, a control character or non-ASCII); a token is visible ASCII characters only")
				}
			}
			return nil
		},
	}, clock, log)
}

// readRedisPassword reads --redis-password-file into cfg.redis.passwords;
// without the flag it sets nothing.
func readRedisPassword(cfg *config, clock func() time.Time, log *slog.Logger) error {
	if cfg.redis.passwordFile == "" {
		return nil
	}
	r, err := loadSecrets(secretFile{
		flag: "redis-password-file", path: cfg.redis.passwordFile, what: "redis password", noun: "password",
		none: "write the password in it, or leave --redis-password-file out to ask no AUTH",
	}, clock, log)
	if err != nil {
		return err
	}
	cfg.redis.passwords = r
	return nil
}

// secretsOf returns the secrets of r as they are now (see reloading), as
// the transports' Passwords and Tokens options take them; nil for a nil r
// (no file: no secret asked).
func secretsOf(r *reloading[[]string]) func() []string {
	if r == nil {
		return nil
	}
	return func() []string { return *r.current() }
}
