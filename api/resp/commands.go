package resp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/redcon"

	"github.com/ratelimitd/ratelimitd/api/internal/secret"
	"github.com/ratelimitd/ratelimitd/table"
)

// cmdID identifies a command served.
type cmdID uint8

const (
	cmdUnknown cmdID = iota
	cmdThrottle
	cmdCheck
	cmdRule
	cmdRefund
	cmdRefundRule
	cmdPing
	cmdEcho
	cmdQuit
	cmdSelect
	cmdHello
	cmdAuth
	cmdClient
	cmdCommand
	cmdConfig
	cmdInfo
	cmdMulti
	cmdExec
	cmdDiscard
	cmdDel
	cmdUnlink
)

// lookup returns the command named name, compared ASCII case-insensitively.
func lookup(name []byte) cmdID {
	var buf [16]byte
	if len(name) > len(buf) {
		return cmdUnknown
	}
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	switch string(buf[:len(name)]) {
	case "cl.throttle":
		return cmdThrottle
	case "rl.check":
		return cmdCheck
	case "rl.rule":
		return cmdRule
	case "rl.refund":
		return cmdRefund
	case "rl.refundrule":
		return cmdRefundRule
	case "ping":
		return cmdPing
	case "echo":
		return cmdEcho
	case "quit":
		return cmdQuit
	case "select":
		return cmdSelect
	case "hello":
		return cmdHello
	case "auth":
		return cmdAuth
	case "client":
		return cmdClient
	case "command":
		return cmdCommand
	case "config":
		return cmdConfig
	case "info":
		return cmdInfo
	case "multi":
		return cmdMulti
	case "exec":
		return cmdExec
	case "discard":
		return cmdDiscard
	case "del":
		return cmdDel
	case "unlink":
		return cmdUnlink
	}
	return cmdUnknown
}

// beforeAuth reports whether c may run before AUTH, as in Redis.
func (c cmdID) beforeAuth() bool { return c == cmdAuth || c == cmdHello || c == cmdQuit }

// session is a connection's state, owned by its goroutine.
type session struct {
	id     uint64
	authed bool
	// client is the client's address as the AUTH failures are counted by
	// (secret.ClientKey).
	client string
	name   string
	// tx is the transaction MULTI began, nil outside one.
	tx *transaction

	// The read being answered: the arguments of its command being parsed
	// (pointing into the connection's buffer), and its replies in order.
	args  [][]byte
	items []item
	out   []byte // the bytes of the replies that are ready, one after another
	// The checks of the read waiting to be decided in one pass.
	checks []check
	reqs   []table.Request
	decs   []table.Decision
	// scratch holds the reply to one check while it is written.
	scratch []byte
}

// item is the reply to one command: ready bytes in session.out (check < 0)
// or a check to decide.
type item struct {
	cmd   cmdID
	res   Result
	end   int // the end of its bytes in out
	check int // index in session.checks, or -1
}

// check is a check waiting for its decision.
type check struct {
	cmd cmdID
	th  throttle // cmdThrottle
	nat native   // cmdCheck, cmdRule
	d   table.Decision
	err error
}

func (c *check) req() table.Request {
	if c.cmd == cmdThrottle {
		return c.th.req
	}
	return c.nat.req
}

// serveConn serves a connection until it closes: each read's whole frames
// are answered together, the checks among them decided in one pass, and
// their replies written in one write.
func (s *Server) serveConn(c *frameConn) {
	defer func() { _ = c.Close() }()
	st := s.newSession(c.nc.RemoteAddr())
	for {
		frames, err := c.frames()
		if err != nil {
			if c.isDraining() {
				c.lingerClose() // the client may still be sending
			}
			return
		}
		more := s.serveFrames(c, st, frames)
		c.consume(len(frames))
		if err := c.flushOut(); err != nil {
			return
		}
		if !more {
			c.lingerClose() // QUIT, or an inline command that does not parse
			return
		}
	}
}

// newSession returns the state of a new connection from the client at
// addr.
func (s *Server) newSession(addr net.Addr) *session {
	st := &session{id: s.nextID.Add(1), authed: s.passwords == nil}
	if addr != nil {
		st.client = secret.ClientKey(addr.String())
	}
	return st
}

// serveFrames answers the commands of frames, whole frames as the scanner
// passed them, in order; it returns false when the connection is to close
// (QUIT, a frame that does not parse, a panic), with the replies queued.
func (s *Server) serveFrames(c *frameConn, st *session, frames []byte) (more bool) {
	defer func() {
		// A broken invariant costs its connection, not the process.
		if r := recover(); r != nil {
			s.log.Error("resp: panic serving a connection; closing it", "panic", r, "stack", string(debug.Stack()))
			c.queue([]byte("-ERR internal error; the connection is closed\r\n"))
			more = false
		}
		clear(st.args) // keep no argument past its read
	}()
	for len(frames) > 0 {
		args, rest, err := parseFrame(frames, st.args[:0])
		frames = rest
		if err != nil {
			// redcon's verdict on an inline command: answered in its place.
			s.flush(c, st)
			c.queue(appendError(nil, "ERR "+err.Error()))
			return false
		}
		if len(args) == 0 {
			continue // an empty inline line, which Redis skips too
		}
		st.args = args
		if !s.command(c, st, args) {
			s.flush(c, st)
			return false
		}
	}
	s.flush(c, st)
	return true
}

// parseFrame parses the first frame of frames (whole frames, as the
// scanner passed them) into args and returns the frames after it. An array
// frame is parsed by redcon.ReadNextCommand into args pointing into
// frames; an inline command (a line, rare: typed by hand) by redcon.Parse,
// which copies it. An inline line of nothing but spaces has no arguments.
func parseFrame(frames []byte, args [][]byte) ([][]byte, []byte, error) {
	if frames[0] == '*' {
		complete, args, _, rest, err := redcon.ReadNextCommand(frames, args)
		if err == nil && !complete {
			// The scanner passed it whole: a disagreement is a broken invariant.
			panic(fmt.Sprintf("resp: redcon found no whole frame in %d bytes the scanner passed", len(frames)))
		}
		return args, rest, err
	}
	end := bytes.IndexByte(frames, '\n') + 1
	if end == 0 {
		panic("resp: an inline frame the scanner passed has no line end")
	}
	line, rest := frames[:end-1], frames[end:]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if len(bytes.TrimLeft(line, " ")) == 0 {
		return args[:0], rest, nil
	}
	cmd, err := redcon.Parse(frames[:end])
	if err != nil {
		return args[:0], rest, err
	}
	return append(args[:0], cmd.Args...), rest, nil
}

// command answers one command, or queues it for the batch; it returns
// false when the connection is to close (QUIT). Inside a transaction, it
// queues the command for EXEC instead (see transaction).
func (s *Server) command(c *frameConn, st *session, args [][]byte) bool {
	id := lookup(args[0])
	if st.tx != nil && s.inTransaction(st, id, args) {
		return true
	}
	s.stats.commands.Add(1)
	switch {
	case id == cmdUnknown:
		if st.tx != nil {
			st.tx.abort()
		}
		s.replyErr(st, id, ResultInvalid, unknownCommand(args))
		return true
	case !st.authed && !id.beforeAuth():
		s.replyErr(st, id, ResultNoAuth, "NOAUTH Authentication required.")
		return true
	}
	switch id {
	case cmdThrottle:
		th, msg := parseThrottle(args)
		if msg != "" {
			s.replyErr(st, id, ResultInvalid, msg)
			return true
		}
		s.queue(st, check{cmd: id, th: th})
	case cmdCheck, cmdRule:
		nat, msg := parseNative(args, id == cmdRule, false, s.opts.Rules)
		if msg != "" {
			s.replyErr(st, id, ResultInvalid, msg)
			return true
		}
		s.queue(st, check{cmd: id, nat: nat})
	case cmdRefund, cmdRefundRule:
		s.refund(c, st, id, args)
	case cmdDel, cmdUnlink:
		s.del(c, st, id, args)
	case cmdQuit:
		s.reply(st, id, ResultOK, redcon.AppendOK(st.out))
		return false
	case cmdInfo:
		// INFO counts the checks before it: decide them first.
		s.flush(c, st)
		s.info(st, args)
	case cmdMulti, cmdExec, cmdDiscard:
		s.transaction(c, st, id, args)
	default:
		s.connCommand(st, id, args)
	}
	return true
}

// queue adds a check to the batch of the read, in its place among the
// replies.
func (s *Server) queue(st *session, c check) {
	st.items = append(st.items, item{cmd: c.cmd, check: len(st.checks)})
	st.checks = append(st.checks, c)
}

// reply adds a ready reply, out being st.out with its bytes appended.
func (s *Server) reply(st *session, id cmdID, res Result, out []byte) {
	st.out = out
	st.items = append(st.items, item{cmd: id, res: res, end: len(out), check: -1})
}

// replyErr adds an error reply.
func (s *Server) replyErr(st *session, id cmdID, res Result, msg string) {
	s.reply(st, id, res, appendError(st.out, msg))
}

// flush decides the queued checks in one pass and writes every reply of
// the read so far, in order.
func (s *Server) flush(c *frameConn, st *session) {
	if len(st.checks) > 0 {
		s.decide(st)
	}
	start := 0
	b := st.scratch
	for _, it := range st.items {
		if it.check < 0 {
			c.queue(st.out[start:it.end])
			start = it.end
			s.obs.Command(cmdNames[it.cmd], it.res)
			continue
		}
		var res Result
		b, res = s.appendCheck(b[:0], &st.checks[it.check])
		c.queue(b)
		s.obs.Command(cmdNames[it.cmd], res)
	}
	st.scratch = b[:0]
	clear(st.checks) // their ids
	clear(st.reqs)
	st.items, st.out, st.checks, st.reqs = st.items[:0], st.out[:0], st.checks[:0], st.reqs[:0]
}

// decide decides the queued checks: in one CheckEach when the Checker
// has it, else one Check after another, in order.
func (s *Server) decide(st *session) {
	n := len(st.checks)
	for i := range st.checks {
		st.reqs = append(st.reqs, st.checks[i].req())
	}
	st.decs = slices.Grow(st.decs[:0], n)[:n]
	clear(st.decs)
	if s.each != nil {
		err := s.each.CheckEach(s.ctx, st.reqs, st.decs)
		for i := range st.checks {
			st.checks[i].d = st.decs[i]
		}
		if err != nil {
			s.eachFailed(st.checks, err)
		}
	} else {
		for i := range st.checks {
			st.checks[i].d, st.checks[i].err = s.checker.Check(s.ctx, st.reqs[i])
		}
	}
	s.obs.Batch(n)
}

// eachFailed gives the checks of a batch the error of CheckEach: to each
// check an *table.IndexError of err names, its own; to every check, an err
// that names none.
func (s *Server) eachFailed(checks []check, err error) {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	named := false
	for _, e := range errs {
		var ie *table.IndexError
		if errors.As(e, &ie) && ie.Index >= 0 && ie.Index < len(checks) {
			checks[ie.Index].err = ie.Err
			named = true
		}
	}
	if !named {
		for i := range checks {
			checks[i].err = err
		}
	}
}

// appendCheck appends the reply to a decided check and returns its result.
func (s *Server) appendCheck(b []byte, c *check) ([]byte, Result) {
	if c.err != nil {
		msg, res := s.failure(cmdNames[c.cmd], c.err)
		return appendError(b, msg), res
	}
	d := c.d
	var res Result
	switch c.cmd {
	case cmdThrottle:
		if d.Full {
			return appendError(b, msgFull), ResultFull
		}
		r := c.th.reply(d)
		res = ResultAllowed
		if r[0] == 1 {
			res = ResultDenied
		}
		b = appendInts(b, r[:])
	default:
		switch {
		case d.Allowed:
			res = ResultAllowed
		case c.nat.shadow:
			res = ResultShadowDenied
		case d.Full:
			return appendError(b, msgFull), ResultFull
		default:
			res = ResultDenied
		}
		r := c.nat.reply(d)
		b = appendInts(b, r[:])
	}
	s.stats.checks.Add(1)
	if res == ResultDenied {
		s.stats.denied.Add(1)
	}
	return b, res
}

// msgFull is the error reply of a check refused because the rate limiter
// holds its most buckets: check_rate's 503 message.
const msgFull = "ERR the rate limiter is full (max buckets); retry"

// failure returns the error reply to a Checker error and its result; it
// logs what is neither bad input nor expected.
func (s *Server) failure(op string, err error) (string, Result) {
	switch {
	case errors.Is(err, table.ErrInvalid):
		return "ERR " + err.Error(), ResultInvalid
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "ERR the check was canceled or timed out; retry", ResultError
	case s.opts.Stopped != nil && errors.Is(err, s.opts.Stopped):
		return "ERR the rate limiter is shutting down; retry", ResultError
	case s.opts.Unavailable != nil && errors.Is(err, s.opts.Unavailable):
		s.log.Warn("resp: "+op+": shard owner unavailable", "err", err)
		return "ERR the rate limiter is temporarily unavailable; retry", ResultError
	}
	s.log.Error("resp: "+op+": rate limiter failed", "err", err)
	return "ERR the rate limiter failed; retry", ResultError
}

// refund answers RL.REFUND or RL.REFUNDRULE after the checks before it, so
// that its effect falls in its place.
func (s *Server) refund(c *frameConn, st *session, id cmdID, args [][]byte) {
	nat, msg := parseNative(args, id == cmdRefundRule, true, s.opts.Rules)
	if msg != "" {
		s.replyErr(st, id, ResultInvalid, msg)
		return
	}
	s.flush(c, st)
	d, err := s.checker.Refund(s.ctx, nat.req)
	if err != nil {
		msg, res := s.failure(cmdNames[id], err)
		s.replyErr(st, id, res, msg)
		return
	}
	r := nat.reply(d)
	s.reply(st, id, ResultOK, appendInts(st.out, r[:]))
}

// del answers DEL and UNLINK key [key ...] after the checks before them:
// it deletes each key's CL.THROTTLE buckets, one key after another, and
// replies how many of the keys had one not yet full again, as Redis counts
// the keys it deletes (redis-cell's key expires once its bucket is full).
// The keys are validated first: a bad one deletes nothing. A key the
// Checker fails to delete is answered with the failure; the keys before it
// stay deleted.
func (s *Server) del(c *frameConn, st *session, id cmdID, args [][]byte) {
	if len(args) < 2 {
		s.replyErr(st, id, ResultInvalid, wrongArity(args[0]))
		return
	}
	if s.resetter == nil {
		s.replyErr(st, id, ResultError, "ERR "+lowerASCII(args[0])+": this rate limiter cannot delete keys")
		return
	}
	for _, k := range args[1:] {
		if msg := keyErr(k); msg != "" {
			s.replyErr(st, id, ResultInvalid, msg)
			return
		}
	}
	s.flush(c, st)
	var n int64
	for _, k := range args[1:] {
		deleted, err := s.resetter.ResetID(s.ctx, throttleNamespace, string(k))
		if err != nil {
			msg, res := s.failure(cmdNames[id], err)
			s.replyErr(st, id, res, msg)
			return
		}
		if deleted > 0 {
			n++
		}
	}
	s.reply(st, id, ResultOK, redcon.AppendInt(st.out, n))
}

// connCommand answers the commands clients send on connect.
func (s *Server) connCommand(st *session, id cmdID, args [][]byte) {
	arity := func() { s.replyErr(st, id, ResultInvalid, wrongArity(args[0])) }
	ok := func(out []byte) { s.reply(st, id, ResultOK, out) }
	switch id {
	case cmdPing:
		switch len(args) {
		case 1:
			ok(redcon.AppendString(st.out, "PONG"))
		case 2:
			ok(redcon.AppendBulk(st.out, args[1]))
		default:
			arity()
		}
	case cmdEcho:
		if len(args) != 2 {
			arity()
			return
		}
		ok(redcon.AppendBulk(st.out, args[1]))
	case cmdSelect:
		if len(args) != 2 {
			arity()
			return
		}
		n, err := strconv.ParseInt(string(args[1]), 10, 64)
		switch {
		case err != nil:
			s.replyErr(st, id, ResultInvalid, "ERR value is not an integer or out of range")
		case n != 0:
			s.replyErr(st, id, ResultInvalid, "ERR DB index is out of range")
		default:
			ok(redcon.AppendOK(st.out))
		}
	case cmdHello:
		// An error, so that clients fall back to RESP2; it echoes no
		// argument, which may hold a password.
		s.replyErr(st, id, ResultInvalid, "ERR unknown command '"+string(args[0])+"', with args beginning with: ")
	case cmdAuth:
		s.auth(st, args)
	case cmdClient:
		s.client(st, args)
	case cmdCommand:
		if len(args) == 1 {
			ok(redcon.AppendArray(st.out, 0))
			return
		}
		switch lowerASCII(args[1]) {
		case "docs", "info", "list":
			ok(redcon.AppendArray(st.out, 0))
		default:
			s.replyErr(st, id, ResultInvalid, unknownSubcommand(args))
		}
	case cmdConfig:
		s.config(st, args)
	}
}

// auth answers AUTH [username] password.
func (s *Server) auth(st *session, args [][]byte) {
	id := cmdAuth
	if len(args) < 2 {
		s.replyErr(st, id, ResultInvalid, wrongArity(args[0]))
		return
	}
	if len(args) > 3 {
		s.replyErr(st, id, ResultInvalid, "ERR syntax error")
		return
	}
	user, pass := "default", args[len(args)-1]
	if len(args) == 3 {
		user = string(args[1])
	}
	if s.passwords == nil {
		if len(args) == 2 {
			s.replyErr(st, id, ResultInvalid, "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
			return
		}
		if user == "default" {
			s.reply(st, id, ResultOK, redcon.AppendOK(st.out))
			return
		}
		s.replyErr(st, id, ResultWrongPass, "WRONGPASS invalid username-password pair or user is disabled.")
		return
	}
	v, retry := s.authFailures.Attempt(st.client, s.opts.Now(), func() bool {
		return user == "default" && secret.In(pass, s.passwords())
	})
	switch v {
	case secret.Limited:
		s.replyErr(st, id, ResultAuthLimited, fmt.Sprintf("ERR too many failed AUTH attempts from this address; retry in %d s", secret.RetrySeconds(retry)))
		return
	case secret.LockedOut:
		s.log.Warn("resp: AUTH refused for a while after too many failures from one address", "client", st.client, "retry_after_s", secret.RetrySeconds(retry))
		fallthrough
	case secret.Refused:
		s.replyErr(st, id, ResultWrongPass, "WRONGPASS invalid username-password pair or user is disabled.")
		return
	}
	st.authed = true
	s.reply(st, id, ResultOK, redcon.AppendOK(st.out))
}

// client answers CLIENT SETNAME, GETNAME, SETINFO and ID.
func (s *Server) client(st *session, args [][]byte) {
	id := cmdClient
	if len(args) < 2 {
		s.replyErr(st, id, ResultInvalid, wrongArity(args[0]))
		return
	}
	sub := lowerASCII(args[1])
	var want int
	switch sub {
	case "setname":
		want = 3
	case "getname", "id":
		want = 2
	case "setinfo":
		want = 4
	}
	switch {
	case want == 0:
		s.replyErr(st, id, ResultInvalid, unknownSubcommand(args))
		return
	case len(args) != want:
		s.replyErr(st, id, ResultInvalid, "ERR wrong number of arguments for 'client|"+sub+"' command")
		return
	}
	switch sub {
	case "setname":
		for _, c := range args[2] {
			if c < '!' || c > '~' {
				s.replyErr(st, id, ResultInvalid, "ERR Client names cannot contain spaces, newlines or special characters.")
				return
			}
		}
		st.name = string(args[2])
		s.reply(st, id, ResultOK, redcon.AppendOK(st.out))
	case "getname":
		if st.name == "" {
			s.reply(st, id, ResultOK, redcon.AppendNull(st.out))
			return
		}
		s.reply(st, id, ResultOK, redcon.AppendBulkString(st.out, st.name))
	case "setinfo":
		switch lowerASCII(args[2]) {
		case "lib-name", "lib-ver":
			s.reply(st, id, ResultOK, redcon.AppendOK(st.out))
		default:
			s.replyErr(st, id, ResultInvalid, "ERR Unrecognized option '"+string(args[2])+"'")
		}
	case "id":
		s.reply(st, id, ResultOK, redcon.AppendInt(st.out, int64(st.id)))
	}
}

// config answers CONFIG GET with the few parameters clients and
// redis-benchmark ask for; any other name matches nothing.
func (s *Server) config(st *session, args [][]byte) {
	id := cmdConfig
	if len(args) < 2 {
		s.replyErr(st, id, ResultInvalid, wrongArity(args[0]))
		return
	}
	if lowerASCII(args[1]) != "get" {
		s.replyErr(st, id, ResultInvalid, unknownSubcommand(args))
		return
	}
	if len(args) < 3 {
		s.replyErr(st, id, ResultInvalid, "ERR wrong number of arguments for 'config|get' command")
		return
	}
	var pairs []string
	for _, a := range args[2:] {
		name := lowerASCII(a)
		if v, ok := s.configValue(name); ok && !slices.Contains(pairs, name) {
			pairs = append(pairs, name, v)
		}
	}
	out := redcon.AppendArray(st.out, len(pairs))
	for _, p := range pairs {
		out = redcon.AppendBulkString(out, p)
	}
	s.reply(st, id, ResultOK, out)
}

// configValue is the value CONFIG GET reports for name.
func (s *Server) configValue(name string) (string, bool) {
	switch name {
	case "save":
		return "", true // no snapshots of Redis's kind
	case "appendonly":
		return "no", true
	case "databases":
		return "1", true
	case "maxclients":
		return strconv.Itoa(s.opts.MaxConns), true
	case "timeout":
		return strconv.FormatInt(int64(max(s.opts.IdleTimeout, 0)/time.Second), 10), true
	}
	return "", false
}

// infoSections are the sections of INFO, in order.
var infoSections = [...]string{"server", "clients", "stats"}

// info answers INFO [section ...].
func (s *Server) info(st *session, args [][]byte) {
	want := func(string) bool { return true }
	if len(args) > 1 {
		names := make([]string, 0, len(args)-1)
		for _, a := range args[1:] {
			names = append(names, lowerASCII(a))
		}
		if !slices.ContainsFunc(names, func(n string) bool { return n == "all" || n == "default" || n == "everything" }) {
			want = func(sec string) bool { return slices.Contains(names, sec) }
		}
	}
	var b strings.Builder
	for _, sec := range infoSections {
		if !want(sec) {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		s.infoSection(&b, sec)
	}
	s.reply(st, cmdInfo, ResultOK, redcon.AppendBulkString(st.out, b.String()))
}

// infoSection writes one INFO section: "# Name" and key:value lines.
func (s *Server) infoSection(b *strings.Builder, sec string) {
	field := func(k string, v int64) {
		b.WriteString(k)
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(v, 10))
		b.WriteString("\r\n")
	}
	switch sec {
	case "server":
		version := s.opts.Version
		if version == "" {
			version = "unknown"
		}
		up := int64(max(s.opts.Now().Sub(s.started), 0) / time.Second)
		b.WriteString("# Server\r\n")
		b.WriteString("redis_version:" + redisVersion + "\r\n")
		b.WriteString("ratelimitd_version:" + stripNewlines(version) + "\r\n")
		b.WriteString("redis_mode:standalone\r\n")
		field("process_id", int64(os.Getpid()))
		field("tcp_port", int64(s.port()))
		field("uptime_in_seconds", up)
		field("uptime_in_days", up/86400)
		s.mu.Lock()
		loops := len(s.loops)
		s.mu.Unlock()
		field("event_loops", int64(loops)) // 0: a goroutine per connection
	case "clients":
		b.WriteString("# Clients\r\n")
		field("connected_clients", s.stats.connsOpen.Load())
		field("maxclients", int64(s.opts.MaxConns))
	case "stats":
		b.WriteString("# Stats\r\n")
		field("total_connections_received", s.stats.connsReceived.Load())
		field("rejected_connections", s.stats.connsRejected.Load())
		field("total_commands_processed", s.stats.commands.Load())
		field("total_checks_served", s.stats.checks.Load())
		field("total_checks_denied", s.stats.denied.Load())
	}
}

// redisVersion is the redis_version INFO reports: a Redis that speaks
// RESP2 only and has no HELLO, which is what clients find here.
const redisVersion = "5.0.0"

// port returns the TCP port served, or 0.
func (s *Server) port() int {
	if a, ok := s.Addr().(*net.TCPAddr); ok {
		return a.Port
	}
	return 0
}

// appendInts appends an array of integers.
func appendInts(b []byte, ns []int64) []byte {
	b = redcon.AppendArray(b, len(ns))
	for _, n := range ns {
		b = redcon.AppendInt(b, n)
	}
	return b
}

// appendError appends an error reply, with msg made one line as Redis
// makes it: line breaks trimmed from its ends, spaces for those within.
func appendError(b []byte, msg string) []byte {
	return redcon.AppendError(b, stripNewlines(strings.Trim(msg, "\r\n")))
}

// stripNewlines replaces each '\r' and '\n' of s by a space.
func stripNewlines(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
}

// maxEcho is how much of a command's name and arguments an unknown
// command's error repeats, as in Redis.
const maxEcho = 128

// unknownCommand is Redis's reply to an unknown command.
func unknownCommand(args [][]byte) string {
	return "ERR unknown command '" + cut(args[0], maxEcho) + "', with args beginning with: " + echoArgs(args[1:])
}

// unknownSubcommand is Redis's reply to an unknown subcommand.
func unknownSubcommand(args [][]byte) string {
	return "ERR unknown subcommand '" + cut(args[1], maxEcho) + "'. Try " + strings.ToUpper(string(args[0])) + " HELP."
}

// echoArgs quotes the arguments, until maxEcho bytes are written.
func echoArgs(args [][]byte) string {
	var b strings.Builder
	for _, a := range args {
		if b.Len() >= maxEcho {
			break
		}
		n := maxEcho - b.Len()
		b.WriteByte('\'')
		b.WriteString(cut(a, n))
		b.WriteString("' ")
	}
	return b.String()
}

// cut returns at most n bytes of b, as a string.
func cut(b []byte, n int) string {
	return string(b[:min(len(b), max(n, 0))])
}
