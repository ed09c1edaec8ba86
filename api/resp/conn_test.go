package resp_test

import (
	"context"
	"maps"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/api/resp"
)

// TestConnectGoRedis checks that go-redis v9 connects with its defaults
// (HELLO 3, then RESP2 after its error; CLIENT SETINFO) and that what
// clients send on connect is answered without an error.
func TestConnectGoRedis(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, goroutines bool) {
		sys, _ := manualSystem(t)
		_, addr := startServer(t, resp.Options{ConnGoroutines: goroutines, Checker: sys})
		ctx := context.Background()
		c := redis.NewClient(&redis.Options{Addr: addr, ClientName: "tester", DB: 0})
		t.Cleanup(func() { _ = c.Close() })
		if got, err := c.Ping(ctx).Result(); err != nil || got != "PONG" {
			t.Fatalf("PING: got %q, %v; want PONG", got, err)
		}
		checks := []struct {
			args []any
			want any
		}{
			{[]any{"PING", "hi"}, "hi"},
			{[]any{"ECHO", "a b"}, "a b"},
			{[]any{"SELECT", 0}, "OK"},
			{[]any{"CLIENT", "SETINFO", "LIB-NAME", "x"}, "OK"},
			{[]any{"CLIENT", "GETNAME"}, "tester"}, // set by go-redis on connect
			{[]any{"CLIENT", "SETNAME", "other"}, "OK"},
			{[]any{"CLIENT", "GETNAME"}, "other"},
			{[]any{"COMMAND"}, []any{}},
			{[]any{"COMMAND", "DOCS"}, []any{}},
			{[]any{"CONFIG", "GET", "save"}, []any{"save", ""}},
			{[]any{"CONFIG", "GET", "appendonly", "nothing", "APPENDONLY"}, []any{"appendonly", "no"}},
			{[]any{"CONFIG", "GET", "*"}, []any{}},
		}
		for _, tc := range checks {
			got, err := c.Do(ctx, tc.args...).Result()
			if err != nil {
				t.Errorf("%q: %v", tc.args, err)
				continue
			}
			if !equalReply(got, tc.want) {
				t.Errorf("%q: got %#v, want %#v", tc.args, got, tc.want)
			}
		}
		if got, err := c.Do(ctx, "CLIENT", "ID").Int64(); err != nil || got < 1 {
			t.Errorf("CLIENT ID: got %d, %v", got, err)
		}
		if err := c.Do(ctx, "QUIT").Err(); err != nil {
			t.Errorf("QUIT: %v", err)
		}
	})
}

// equalReply compares go-redis replies: strings, integers and arrays.
func equalReply(got, want any) bool {
	g, ok1 := got.([]any)
	w, ok2 := want.([]any)
	if ok1 || ok2 {
		return ok1 && ok2 && slices.EqualFunc(g, w, equalReply)
	}
	return got == want
}

// TestConnectRaw checks the exact bytes of the connect-time commands and
// of Redis's errors for what is not served.
func TestConnectRaw(t *testing.T) {
	t.Parallel()
	sys, _ := manualSystem(t)
	_, addr := startServer(t, resp.Options{Checker: sys, MaxConns: 7, IdleTimeout: 90 * time.Second})
	c := dialRaw(t, addr)
	cases := []struct{ send, want string }{
		{frame("PING"), "+PONG\r\n"},
		{"PING\r\n", "+PONG\r\n"}, // inline, as telnet sends it
		{frame("ping", "x\r\ny"), "$4\r\nx\r\ny\r\n"},
		{frame("PING", "a", "b"), "-ERR wrong number of arguments for 'ping' command\r\n"},
		{frame("ECHO"), "-ERR wrong number of arguments for 'echo' command\r\n"},
		{frame("HELLO", "3", "AUTH", "default", "secret"), "-ERR unknown command 'HELLO', with args beginning with: \r\n"},
		{frame("SELECT", "1"), "-ERR DB index is out of range\r\n"},
		{frame("SELECT", "x"), "-ERR value is not an integer or out of range\r\n"},
		{frame("GET", "k"), "-ERR unknown command 'GET', with args beginning with: 'k' \r\n"},
		{frame("SET", "k\r\n", strings.Repeat("v", 200)), "-ERR unknown command 'SET', with args beginning with: 'k  ' '" + strings.Repeat("v", 122) + "' \r\n"},
		{frame(strings.Repeat("X", 200)), "-ERR unknown command '" + strings.Repeat("X", 128) + "', with args beginning with: \r\n"},
		{frame("CLIENT"), "-ERR wrong number of arguments for 'client' command\r\n"},
		{frame("CLIENT", "KILL", "x"), "-ERR unknown subcommand 'KILL'. Try CLIENT HELP.\r\n"},
		{frame("CLIENT", "SETNAME", "a b"), "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"},
		{frame("CLIENT", "SETNAME"), "-ERR wrong number of arguments for 'client|setname' command\r\n"},
		{frame("CLIENT", "GETNAME"), "$-1\r\n"},
		{frame("CLIENT", "SETINFO", "color", "red"), "-ERR Unrecognized option 'color'\r\n"},
		{frame("COMMAND", "COUNT"), "-ERR unknown subcommand 'COUNT'. Try COMMAND HELP.\r\n"},
		{frame("CONFIG", "SET", "save", ""), "-ERR unknown subcommand 'SET'. Try CONFIG HELP.\r\n"},
		{frame("CONFIG", "GET"), "-ERR wrong number of arguments for 'config|get' command\r\n"},
		{frame("config", "get", "maxclients", "timeout", "databases"), "*6\r\n$10\r\nmaxclients\r\n$1\r\n7\r\n$7\r\ntimeout\r\n$2\r\n90\r\n$9\r\ndatabases\r\n$1\r\n1\r\n"},
		{frame("AUTH", "pw"), "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"},
		{frame("AUTH", "default", "pw"), "+OK\r\n"},
		{frame("AUTH", "alice", "pw"), "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{frame("AUTH", "a", "b", "c"), "-ERR syntax error\r\n"},
	}
	for _, tc := range cases {
		c.send(tc.send)
		if got := c.mustReply(); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.send, got, tc.want)
		}
	}
	c.send(frame("QUIT", "now"))
	if got := c.mustReply(); got != "+OK\r\n" {
		t.Errorf("QUIT: got %q", got)
	}
	if got, err := c.reply(); err == nil {
		t.Errorf("after QUIT: got %q, want the connection closed", got)
	}
}

// TestQuitPipelined checks that the commands pipelined after QUIT are not
// run: the connection closes after QUIT's +OK.
func TestQuitPipelined(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, goroutines bool) {
		sys, _ := manualSystem(t)
		_, addr := startServer(t, resp.Options{ConnGoroutines: goroutines, Checker: sys})
		c := dialRaw(t, addr)
		c.send(frame("CL.THROTTLE", "q", "1", "1", "60") + frame("QUIT") + frame("CL.THROTTLE", "q", "1", "1", "60"))
		if got, want := c.mustReply(), ints(0, 2, 1, -1, 60); got != want {
			t.Errorf("first: got %q, want %q", got, want)
		}
		if got := c.mustReply(); got != "+OK\r\n" {
			t.Errorf("QUIT: got %q", got)
		}
		if got, err := c.reply(); err == nil {
			t.Errorf("after QUIT: got %q, want the connection closed", got)
		}
		// The third command was not counted: one token of two is in use.
		c2 := dialRaw(t, addr)
		c2.send(frame("CL.THROTTLE", "q", "1", "1", "60", "0"))
		if got, want := c2.mustReply(), ints(0, 2, 1, -1, 60); got != want {
			t.Errorf("peek: got %q, want %q", got, want)
		}
	})
}

// TestAuth checks that with a password every command but AUTH, HELLO and
// QUIT needs AUTH first, with Redis's replies, and that go-redis with the
// password connects (HELLO fails, AUTH follows).
func TestAuth(t *testing.T) {
	t.Parallel()
	sys, _ := manualSystem(t)
	obs := newCounter()
	_, addr := startServer(t, resp.Options{Checker: sys, Password: "s3cret", Observer: obs})
	c := dialRaw(t, addr)
	steps := []struct{ send, want string }{
		{frame("PING"), "-NOAUTH Authentication required.\r\n"},
		{frame("CL.THROTTLE", "k", "1", "1", "1"), "-NOAUTH Authentication required.\r\n"},
		{frame("INFO"), "-NOAUTH Authentication required.\r\n"},
		{frame("HELLO", "3"), "-ERR unknown command 'HELLO', with args beginning with: \r\n"},
		{frame("GET", "k"), "-ERR unknown command 'GET', with args beginning with: 'k' \r\n"},
		{frame("AUTH", "wrong"), "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{frame("AUTH", "s3cre"), "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{frame("AUTH", "admin", "s3cret"), "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{frame("PING"), "-NOAUTH Authentication required.\r\n"},
		{frame("AUTH", "s3cret"), "+OK\r\n"},
		{frame("PING"), "+PONG\r\n"},
		{frame("AUTH", "wrong"), "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{frame("PING"), "+PONG\r\n"}, // a failed AUTH keeps the connection's login
	}
	for _, s := range steps {
		c.send(s.send)
		if got := c.mustReply(); got != s.want {
			t.Errorf("%q: got %q, want %q", s.send, got, s.want)
		}
	}
	c2 := dialRaw(t, addr)
	c2.send(frame("AUTH", "default", "s3cret") + frame("CL.THROTTLE", "k", "1", "1", "1"))
	if got := c2.mustReply(); got != "+OK\r\n" {
		t.Errorf("AUTH default: got %q", got)
	}
	if got, want := c2.mustReply(), ints(0, 2, 1, -1, 1); got != want {
		t.Errorf("after AUTH in the same pipeline: got %q, want %q", got, want)
	}
	c3 := dialRaw(t, addr)
	c3.send(frame("QUIT"))
	if got := c3.mustReply(); got != "+OK\r\n" {
		t.Errorf("QUIT before AUTH: got %q", got)
	}

	ctx := context.Background()
	good := newClient(t, addr, 1, "s3cret")
	if got := throttle(t, good, "k", 1, 1, 1); !slices.Equal(got, []int64{0, 2, 0, -1, 2}) {
		t.Errorf("go-redis with the password: got %v", got)
	}
	bad := newClient(t, addr, 1, "nope")
	if err := bad.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("go-redis with a wrong password: got %v, want WRONGPASS", err)
	}
	none := newClient(t, addr, 1, "")
	if err := none.Ping(ctx).Err(); err == nil || err.Error() != "NOAUTH Authentication required." {
		t.Errorf("go-redis without a password: got %v, want NOAUTH", err)
	}
	for key, want := range map[string]int{"ping noauth": 3, "auth wrongpass": 5, "auth ok": 3} {
		if got := obs.command(key); got < want {
			t.Errorf("observer %q: got %d, want at least %d", key, got, want)
		}
	}
}

// TestAuthFailuresLimited: an address that fails AUTH DefaultAuthFailures (10)
// times at once is refused, its password not even compared, until its
// budget refills (one failure per 6 s); successful AUTHs count nothing (a
// pool of many connections is never limited), another address is not
// affected, and the refusals are counted as auth_limited.
func TestAuthFailuresLimited(t *testing.T) {
	t.Parallel()
	sys, _ := manualSystem(t)
	obs := newCounter()
	clock := clocktest.New(epoch)
	_, addr := startServer(t, resp.Options{Checker: sys, Password: "s3cret", Observer: obs, Now: clock.Now})
	wrong := "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
	c := dialRaw(t, addr)
	for range 30 { // right ones spend nothing
		c.exchange(rawStep{frame("AUTH", "s3cret"), "+OK\r\n"})
	}
	for i := range resp.DefaultAuthFailures {
		c.exchange(rawStep{frame("AUTH", "wrong-"+strconv.Itoa(i)), wrong})
	}
	limited := "-ERR too many failed AUTH attempts from this address; retry in 6 s\r\n"
	c.exchange(
		rawStep{frame("AUTH", "s3cret"), limited}, // not compared
		rawStep{frame("AUTH", "default", "wrong"), limited},
		rawStep{frame("PING"), "+PONG\r\n"}, // logged in before: still so
	)
	fresh := dialRaw(t, addr)
	fresh.exchange(
		rawStep{frame("AUTH", "s3cret"), limited}, // the address, not the connection
		rawStep{frame("PING"), "-NOAUTH Authentication required.\r\n"},
	)

	// Another address (127.0.0.2 is loopback too) has its own budget.
	other := dialRawFrom(t, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, addr)
	other.exchange(rawStep{frame("AUTH", "wrong"), wrong}, rawStep{frame("AUTH", "s3cret"), "+OK\r\n"})

	clock.Advance(5 * time.Second)
	fresh.exchange(rawStep{frame("AUTH", "s3cret"), "-ERR too many failed AUTH attempts from this address; retry in 1 s\r\n"})
	clock.Advance(time.Second) // one failure's worth back
	fresh.exchange(
		rawStep{frame("AUTH", "nope"), wrong},
		rawStep{frame("AUTH", "s3cret"), limited},
	)
	clock.Advance(6 * time.Second)
	fresh.exchange(rawStep{frame("AUTH", "s3cret"), "+OK\r\n"}, rawStep{frame("PING"), "+PONG\r\n"})
	if got := obs.command("auth auth_limited"); got != 5 {
		t.Errorf("observer auth auth_limited: got %d, want 5", got)
	}
	if got := obs.command("auth wrongpass"); got != resp.DefaultAuthFailures+2 {
		t.Errorf("observer auth wrongpass: got %d, want %d", got, resp.DefaultAuthFailures+2)
	}
}

// TestAuthFailuresConcurrent: 50 connections from one address, each
// pipelining 4 wrong AUTHs at once, get exactly DefaultAuthFailures
// WRONGPASS between them and "too many failed AUTH attempts" for the other
// 190: parallel guesses get no more tries than a sequence of them.
func TestAuthFailuresConcurrent(t *testing.T) {
	t.Parallel()
	sys, _ := manualSystem(t)
	obs := newCounter()
	_, addr := startServer(t, resp.Options{Checker: sys, Password: "s3cret", Observer: obs, Now: clocktest.New(epoch).Now})
	const conns, each = 50, 4
	cs := make([]*rawConn, conns)
	for i := range cs {
		cs[i] = dialRaw(t, addr)
	}
	replies := make(chan string, conns*each)
	errs := make(chan error, conns)
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			var b strings.Builder
			for j := range each {
				b.WriteString(frame("AUTH", "wrong-"+strconv.Itoa(i*each+j)))
			}
			if _, err := c.nc.Write([]byte(b.String())); err != nil {
				errs <- err
				return
			}
			for range each {
				line, err := c.rd.ReadString('\n')
				if err != nil {
					errs <- err
					return
				}
				replies <- line
			}
		})
	}
	wg.Wait()
	close(errs)
	close(replies)
	for err := range errs {
		t.Fatal(err)
	}
	got := map[string]int{}
	for r := range replies {
		got[r]++
	}
	want := map[string]int{
		"-WRONGPASS invalid username-password pair or user is disabled.\r\n":     resp.DefaultAuthFailures,
		"-ERR too many failed AUTH attempts from this address; retry in 6 s\r\n": conns*each - resp.DefaultAuthFailures,
	}
	if !maps.Equal(got, want) {
		t.Errorf("replies %v, want %v", got, want)
	}
	if n := obs.command("auth wrongpass"); n != resp.DefaultAuthFailures {
		t.Errorf("observer auth wrongpass: got %d, want %d", n, resp.DefaultAuthFailures)
	}
}

// TestAuthFailuresOptions: AuthFailures sets the number of failures an
// address may make; a negative one turns the limit off.
func TestAuthFailuresOptions(t *testing.T) {
	t.Parallel()
	sys, _ := manualSystem(t)
	wrong := "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
	_, addr := startServer(t, resp.Options{Checker: sys, Password: "s3cret", AuthFailures: 2})
	c := dialRaw(t, addr)
	c.exchange(
		rawStep{frame("AUTH", "a"), wrong},
		rawStep{frame("AUTH", "b"), wrong},
		rawStep{frame("AUTH", "s3cret"), "-ERR too many failed AUTH attempts from this address; retry in 30 s\r\n"},
	)
	_, addr = startServer(t, resp.Options{Checker: sys, Password: "s3cret", AuthFailures: -1})
	c = dialRaw(t, addr)
	for range 3 * resp.DefaultAuthFailures {
		c.exchange(rawStep{frame("AUTH", "wrong"), wrong})
	}
	c.exchange(rawStep{frame("AUTH", "s3cret"), "+OK\r\n"})
}

// TestAuthRotation: with Options.Passwords, AUTH accepts any password the
// function returns at that AUTH, so a rotation (old, then old and new,
// then new) moves clients over without a refused AUTH, and a connection
// authenticated with the old password stays authenticated once it is
// dropped.
func TestAuthRotation(t *testing.T) {
	t.Parallel()
	sys, _ := manualSystem(t)
	var current atomic.Pointer[[]string]
	set := func(pws ...string) { current.Store(&pws) }
	set("old-secret")
	_, addr := startServer(t, resp.Options{Checker: sys, Passwords: func() []string { return *current.Load() }})
	wrong := "-WRONGPASS invalid username-password pair or user is disabled.\r\n"

	early := dialRaw(t, addr)
	early.exchange(
		rawStep{frame("PING"), "-NOAUTH Authentication required.\r\n"},
		rawStep{frame("AUTH", "new-secret"), wrong},
		rawStep{frame("AUTH", "old-secret"), "+OK\r\n"},
	)

	set("old-secret", "new-secret", "")
	both := dialRaw(t, addr)
	both.exchange(
		rawStep{frame("AUTH", "default", "new-secret"), "+OK\r\n"},
		rawStep{frame("AUTH", "old-secret"), "+OK\r\n"},
		rawStep{frame("AUTH", ""), wrong}, // an empty entry matches nothing
		rawStep{frame("AUTH", "other"), wrong},
	)
	ctx := context.Background()
	pooled := newClient(t, addr, 2, "new-secret")
	if got := throttle(t, pooled, "k", 1, 1, 1); !slices.Equal(got, []int64{0, 2, 1, -1, 1}) {
		t.Errorf("go-redis with the new password during the rotation: got %v", got)
	}

	set("new-secret")
	late := dialRaw(t, addr)
	late.exchange(
		rawStep{frame("AUTH", "old-secret"), wrong},
		rawStep{frame("PING"), "-NOAUTH Authentication required.\r\n"},
		rawStep{frame("AUTH", "new-secret"), "+OK\r\n"},
		rawStep{frame("PING"), "+PONG\r\n"},
	)
	early.exchange(rawStep{frame("PING"), "+PONG\r\n"}) // logged in before the old one went
	if err := newClient(t, addr, 1, "old-secret").Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("go-redis with the dropped password: got %v, want WRONGPASS", err)
	}
	if got := throttle(t, newClient(t, addr, 1, "new-secret"), "k", 1, 1, 1); !slices.Equal(got, []int64{0, 2, 0, -1, 2}) {
		t.Errorf("go-redis with the new password after the rotation: got %v", got)
	}
}

// TestInfo checks INFO's sections and fields.
func TestInfo(t *testing.T) {
	t.Parallel()
	sys, clock := manualSystem(t)
	srv, addr := startServer(t, resp.Options{Checker: sys, Now: clock.Now, Version: "1.2.3", MaxConns: 9})
	c := newClient(t, addr, 1, "")
	throttle(t, c, "i", 0, 1, 60)
	throttle(t, c, "i", 0, 1, 60) // denied
	clock.Advance(3*24*time.Hour + 5*time.Second)
	ctx := context.Background()
	info, err := c.Info(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := strings.Cut(srv.Addr().String(), "127.0.0.1:")
	for _, want := range []string{
		"# Server\r\nredis_version:5.0.0\r\nratelimitd_version:1.2.3\r\nredis_mode:standalone\r\n",
		"\r\ntcp_port:" + port + "\r\nuptime_in_seconds:259205\r\nuptime_in_days:3\r\nevent_loops:" + strconv.Itoa(runtime.GOMAXPROCS(0)) + "\r\n\r\n# Clients\r\nconnected_clients:1\r\nmaxclients:9\r\n\r\n# Stats\r\n",
		"\r\ntotal_checks_served:2\r\ntotal_checks_denied:1\r\n",
	} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO lacks %q:\n%s", want, info)
		}
	}
	if !strings.HasSuffix(info, "total_checks_denied:1\r\n") {
		t.Errorf("INFO does not end with its last field:\n%q", info)
	}
	// Served on goroutines: no event loop.
	_, addr2 := startServer(t, resp.Options{Checker: sys, ConnGoroutines: true})
	if server, err := newClient(t, addr2, 1, "").Info(ctx, "server").Result(); err != nil || !strings.Contains(server, "\r\nevent_loops:0\r\n") {
		t.Errorf("INFO server of a server on goroutines: got %q, %v; want event_loops:0", server, err)
	}
	clients, err := c.Info(ctx, "clients").Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := "# Clients\r\nconnected_clients:1\r\nmaxclients:9\r\n"; clients != want {
		t.Errorf("INFO clients: got %q, want %q", clients, want)
	}
	if none, err := c.Info(ctx, "keyspace").Result(); err != nil || none != "" {
		t.Errorf("INFO keyspace: got %q, %v; want empty", none, err)
	}
}
