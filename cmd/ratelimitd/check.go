package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/api/rls"
	"github.com/ratelimitd/ratelimitd/api/rules"
)

// checkCommand is the first argument of ratelimitd check.
const checkCommand = "check"

// fileCheck is one file (or set of files) the daemon reads at start, and
// how to read it as the start does.
type fileCheck struct {
	flag, path string
	// read reads and validates the file as the start does, returning a
	// summary of what it holds, or the error the start would stop on.
	read func() (string, error)
}

// checkFiles is ratelimitd check: it reads every file the flags name
// (--rules, --rls-config, --admin-token-file, --redis-password-file,
// --tls-cert with --tls-key and --tls-client-ca; the cluster's TLS files
// are read with the flags) as the daemon's start does, and reports each on
// stdout, "ok" with what it holds or "FAIL" with the error the start would
// stop on (or, for a certificate, one outside its validity, which the start
// would serve but no client accept), without starting anything: no data directory, listener or etcd
// is touched. It returns exitOK when every file passes, exitFailure when
// one does not, and exitUsage (saying so on stderr) when the flags name no
// file. A CI pipeline runs it on a config change before the change ships,
// as envoyproxy/ratelimit's config_check.
func checkFiles(cfg *config, stdout, stderr io.Writer) int {
	discard := slog.New(slog.DiscardHandler)
	var checks []fileCheck
	if cfg.rulesFile != "" {
		checks = append(checks, fileCheck{"--rules", cfg.rulesFile, func() (string, error) {
			list, err := rules.LoadFile(cfg.rulesFile)
			if err != nil {
				return "", err
			}
			st, err := rules.NewStore(list)
			if err != nil {
				return "", err
			}
			return plural(st.Current().Len(), "rule"), nil
		}})
	}
	if cfg.rls.configPath != "" {
		checks = append(checks, fileCheck{"--rls-config", cfg.rls.configPath, func() (string, error) {
			c, err := rls.Load(cfg.rls.configPath)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%s (%s) in %s", plural(len(c.Domains()), "domain"), strings.Join(c.Domains(), ", "), plural(len(c.Files()), "file")), nil
		}})
	}
	if cfg.adminTokenFile != "" {
		checks = append(checks, fileCheck{"--admin-token-file", cfg.adminTokenFile, func() (string, error) {
			r, err := readAdminTokens(cfg, time.Now, discard)
			if err != nil {
				return "", err
			}
			return plural(len(*r.current()), "token"), nil
		}})
	}
	if cfg.redis.passwordFile != "" {
		checks = append(checks, fileCheck{"--redis-password-file", cfg.redis.passwordFile, func() (string, error) {
			c := *cfg
			if err := readRedisPassword(&c, time.Now, discard); err != nil {
				return "", err
			}
			return plural(len(*c.redis.passwords.current()), "password"), nil
		}})
	}
	if cfg.tls.certFile != "" {
		checks = append(checks, fileCheck{"--tls-cert", cfg.tls.certFile, func() (string, error) {
			lt, err := loadListenerTLS(cfg.tls, time.Now, discard)
			if err != nil {
				return "", err
			}
			leaf := lt.cert.r.current().Leaf
			// The start would serve it, but no client would take it: a
			// deploy of it is broken.
			switch now := time.Now(); {
			case now.After(leaf.NotAfter):
				return "", fmt.Errorf("the certificate for %s expired at %s", leaf.Subject, leaf.NotAfter.UTC().Format(time.RFC3339))
			case now.Before(leaf.NotBefore):
				return "", fmt.Errorf("the certificate for %s is not valid before %s", leaf.Subject, leaf.NotBefore.UTC().Format(time.RFC3339))
			}
			s := fmt.Sprintf("a certificate for %s, valid until %s", leaf.Subject, leaf.NotAfter.UTC().Format(time.RFC3339))
			if lt.ca != nil {
				s += ", client certificates verified by " + cfg.tls.clientCAFile
			}
			return s, nil
		}})
	}
	if len(checks) == 0 {
		fmt.Fprintln(stderr, "ratelimitd check: the flags name no file to check: give it the daemon's flags, such as --rules FILE, --rls-config PATH, --admin-token-file FILE, --redis-password-file FILE or --tls-cert FILE --tls-key FILE")
		return exitUsage
	}
	failed := 0
	for _, c := range checks {
		what, err := c.read()
		if err != nil {
			failed++
			fmt.Fprintf(stdout, "FAIL  %s %s: %v\n", c.flag, c.path, err)
			continue
		}
		fmt.Fprintf(stdout, "ok    %s %s: %s\n", c.flag, c.path, what)
	}
	if failed > 0 {
		fmt.Fprintf(stdout, "%d of %d failed\n", failed, len(checks))
		return exitFailure
	}
	fmt.Fprintf(stdout, "all %d ok\n", len(checks))
	return exitOK
}

// plural returns "n noun" or "n nouns".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
