// Package resp is the Redis protocol (RESP2) transport of ratelimitd: a
// server, built on github.com/tidwall/redcon's RESP parser and writers,
// that answers redis-cell's CL.THROTTLE byte for byte, native RL.*
// commands with check_rate's semantics, and what Redis clients send when
// they connect, so that an app already limiting through Redis points its
// client here and changes nothing else.
//
// # CL.THROTTLE
//
//	CL.THROTTLE key max_burst count period [quantity]
//
// allows count per period seconds with a bucket of max_burst+1, spending
// quantity (default 1) tokens, and replies with redis-cell's five integers:
//
//	[limited (0 or 1), max_burst+1, remaining, retry_after, reset_after]
//
// retry_after is -1 when allowed, and also when quantity exceeds
// max_burst+1 (it never fits); reset_after is the time until the bucket is
// full again. Seconds are rounded as redis-cell rounds them: the whole
// seconds, plus one when the rest holds at least a millisecond (3.9 s is
// 4, 0.1 s is 1, 1.0004 s is 1). A denied request consumes nothing;
// quantity 0 is a peek, allowed (unless the bucket is over full), that
// stores nothing. The check runs on the Checker as every other check does:
// a token_bucket of Scale period, Limit count and Burst max_burst+1, in
// the namespace "CL.THROTTLE", which no rule name can be (rule names are
// [a-z0-9_.-]) and no ad-hoc check has, so its keys count apart from
// check_rate's ids and rules. remaining and reset_after are computed from
// the Decision with redis-cell's formulas (Decision.ResetAfter is exactly
// TAT − now).
//
// Where redis-cell answers an error, the reply is its error, byte for
// byte: "Cell error: Store error: " followed by "Usage: cl.throttle <key>
// <max_burst> <count per period> <period> [<quantity>]", "Couldn't parse
// as integer: ARG" (integers as Rust parses them: an optional sign, digits,
// no overflow) or "Zero rates are not supported" (count or period 0).
// Redis sends a module's error as it is, without "ERR", and so does this
// server: an app that matches redis-cell's messages, or their "Cell
// error" prefix, goes on matching them, and every client takes the reply
// for an error either way ("ERR" is a convention of Redis's own errors,
// not of the protocol). Where redis-cell
// crashes, overflows or answers nonsense, the reply is "ERR ARG: RULE"
// instead: max_burst negative or 9223372036854775807 (whose +1 overflows),
// count or period negative, period over 31622400 s (table.MaxScale), a
// refill time (max_burst+1) × period/count over table.MaxScale, quantity
// negative, a key empty, over table.MaxIDLen bytes or not UTF-8.
//
// Differences from redis-cell, all at the nanosecond scale: the table's
// emission interval is period/count rounded up to the nanosecond, where
// redis-cell truncates it (through a float64), so that the rate is never
// exceeded; when period/count is not a whole number of nanoseconds, a
// token here comes back up to a nanosecond later, which can move a
// reply's seconds across a millisecond boundary, or deny a request made
// in the very nanosecond redis-cell would first allow it. redis-cell
// computes remaining in whole microseconds, here in nanoseconds: the two
// agree whenever period/count is a whole number of microseconds. A key's
// state is shared by the calls that give it the same period (and, when
// the refill time exceeds the period, the same refill time); redis-cell
// keeps one state per key whatever the parameters.
//
// # DEL
//
//	DEL key [key ...]
//	UNLINK key [key ...]
//
// delete each key's CL.THROTTLE state, under every max_burst, count and
// period it was throttled with (IDResetter.ResetID of the namespace
// "CL.THROTTLE"), so that the key's next request starts from a full
// bucket, and reply with how many of the keys had a bucket not yet full
// again, as Redis counts the keys it deletes (redis-cell's key expires once
// its bucket is full). They decide the checks before them first, so that
// the delete falls in its place, and delete one key after another (a
// failure, such as an owner unavailable, is the reply, and the keys before
// it stay deleted). The keys are validated first, by CL.THROTTLE's rules
// for a key ("ERR key: RULE"): a bad one deletes nothing. RL.* ids are not
// keys: DEL leaves them alone. With a Checker that is no IDResetter, both
// are answered "ERR del: this rate limiter cannot delete keys".
//
// # Native commands
//
//	RL.CHECK id scale limit [HITS n] [ALGORITHM a] [BURST b]
//	RL.RULE rule id [HITS n]
//	RL.REFUND id scale limit HITS n [ALGORITHM a] [BURST b] [WINDOW w]
//	RL.REFUNDRULE rule id HITS n [WINDOW w]
//
// RL.CHECK is check_rate: scale in milliseconds or a Go duration (30s),
// limit ≥ 1, HITS ≥ 0 (default 1; 0 is a peek), ALGORITHM one of
// fixed_window (the default), sliding_window, token_bucket, leaky_bucket,
// BURST ≥ 0. RL.RULE checks under a rule of Options.Rules, in the rule's
// namespace. Both reply with six integers, check_rate's JSON members:
//
//	[allowed (0 or 1), count, limit, remaining, reset_ms, retry_after_ms]
//
// with durations rounded up to the millisecond; a shadow rule's denial is
// allowed 1 with the real count, remaining and retry_after_ms. RL.REFUND
// and RL.REFUNDRULE give back HITS (≥ 1: the hits given back, where
// /refund takes them negative) to the bucket of the same limit, only in
// window w when WINDOW is given (a check_rate answer's Ratelimit-Window),
// and reply with the same six integers for a peek afterwards. Option names
// are case-insensitive and may come in any order, each once. Bad input is
// answered "ERR FIELD: RULE" in check_rate's words (ERR scale: must be
// between 1ms and 8784h0m0s), a full rate limiter "ERR the rate limiter
// is full (max buckets); retry", a failing one "ERR the rate limiter ...;
// retry".
//
// # Connection commands
//
// PING [msg], ECHO msg, QUIT (+OK, then the connection closes; what was
// pipelined after it is not run), SELECT 0 (any other database is an
// error), CLIENT SETNAME/GETNAME/SETINFO/ID, COMMAND [DOCS|INFO|LIST]
// (an empty array), CONFIG GET name... (save "", appendonly no, databases
// 1, maxclients, timeout; any other name matches nothing, patterns
// included), INFO [section...] (server, clients, stats: redis_version
// 5.0.0, the Redis whose subset is spoken, ratelimitd_version, uptime,
// event_loops (0 when each connection has a goroutine of its own),
// connections, commands and checks served and denied), and AUTH. HELLO is
// answered "ERR unknown command 'HELLO', with args beginning with: " (its
// arguments, which may hold a password, are not repeated), as a Redis
// older than 6 answers it, so that clients go on in RESP2. Any other
// command gets Redis's "ERR unknown command 'NAME', with args beginning
// with: 'ARG' ...".
//
// # AUTH
//
// With Options.Password, a connection must send AUTH password (or AUTH
// default password) before any command but AUTH, HELLO and QUIT, which
// are answered "NOAUTH Authentication required." (an unknown command is
// still answered as unknown, as Redis does). A wrong password, or a user
// other than default, is answered "WRONGPASS invalid username-password
// pair or user is disabled." and leaves the connection as it was. The
// password is compared in constant time (of SHA-256 digests, so its length
// does not show either). With Options.Passwords instead, AUTH accepts any
// of the passwords it returns at that moment, each compared the same way:
// a daemon rotates its password by accepting the old and the new one while
// its clients move over, then only the new one. A connection keeps its
// login when its password is dropped, as in Redis.
//
// Failed AUTHs are limited per client address (Options.AuthFailures): past the
// limit an AUTH is answered "ERR too many failed AUTH attempts from this
// address; retry in N s" without its password being compared, so that a
// password cannot be guessed at the listener's speed, nor faster over many
// connections at once: an address's AUTHs are compared one at a time, so
// parallel guesses get no more tries than a sequence. Successful AUTHs
// count nothing.
//
// # Pipelining
//
// The commands a client pipelines, as far as one read of the connection
// brings them, are answered together: their checks (CL.THROTTLE, RL.CHECK,
// RL.RULE) are decided in one pass, by EachChecker.CheckEach when the
// Checker has it, else one Check after another, in order, and every reply
// is written in order, in one flush. A malformed check is answered in its
// place, outside the batch; a check the Checker fails is answered with its
// error in its place, and the others of the batch with their decisions
// (actors.System fails only the checks of a shard that failed). RL.REFUND, RL.REFUNDRULE, DEL,
// UNLINK, INFO and QUIT first decide the checks before them, so that their
// effect falls in its place.
//
// # Transactions
//
// MULTI, the commands, EXEC, as redis-py's pipeline() sends a pipeline by
// default (go-redis's TxPipelined and ioredis's multi() too): between
// MULTI and EXEC each command is answered QUEUED and kept; EXEC runs them
// in order and answers an array of their replies, each what the command
// alone gets, its error for bad arguments included (nothing is rolled
// back, as in Redis); DISCARD drops them. A command that cannot be queued
// (an unknown one, AUTH or HELLO, an EXEC or DISCARD with arguments, one
// past the bounds below) is answered with its error, and EXEC then
// answers "EXECABORT Transaction discarded because of previous errors."
// and runs nothing. MULTI inside MULTI is an error that aborts nothing;
// QUIT answers OK and closes, running nothing; EXEC and DISCARD without
// MULTI are errors. EXEC decides its checks as a pipeline's, in passes of
// at most 1,000, each check exact and in order; the checks of other
// connections may be decided between them (Redis runs a transaction
// alone, but a rate limiter has no reads for that to protect). WATCH is
// an unknown command: there are no keys to watch. A transaction queues at
// most 10,000 commands holding at most 1 MiB (their arguments, and 24
// bytes for each, its slice).
//
// # Limits
//
// Each connection reads into a buffer of 4 KiB, grown only while it reads
// a longer command and let go after it, and keeps at most 8 KiB of room
// for its replies between reads. A command has at most Options.MaxArgs
// arguments (32), each at most Options.MaxBulk bytes (4096, above
// table.MaxIDLen so an over-long id gets its ERR reply), an inline command
// a line of at most Options.MaxInline bytes (16 KiB): the server checks the
// frames as the bytes arrive, before it reads more, and hands redcon
// (redcon.ReadNextCommand) only whole frames, whose arguments it parses in
// place: serving a command copies none of it and allocates nothing but
// what its check keeps (the id). Its own server loop would copy each
// command and allocate its arguments (about 500 bytes a command, measured),
// so the package serves the connections itself. A
// command over a limit, or not RESP, is answered with Redis's "ERR Protocol
// error: ..." and its connection is closed; the others go on. At most
// Options.MaxConns connections are open (10000); one more is answered "ERR
// max number of clients reached" and closed. A command must arrive within
// Options.ReadTimeout of its first byte (10 s), a connection that sends
// nothing for Options.IdleTimeout is closed (5 min), and a batch of
// replies must be written within Options.WriteTimeout (10 s) of the
// moment it has to wait for room in the socket (a client that stops
// reading its replies).
//
// With Options.TLSConfig every connection is TLS only: its handshake must
// end within Options.ReadTimeout, and the refusal of a connection over the
// cap is sent over TLS within a second (at most 16 such handshakes at once;
// past them a connection over the cap is closed without a reply).
//
// # Event loops
//
// On Linux the plain TCP connections are served by event loops, one per
// processor (GOMAXPROCS), each a goroutine waiting on an epoll set of its
// own (level-triggered), itself registered in the runtime's poller, so
// that no thread blocks in epoll_wait. For each connection ready, a loop
// reads once, answers the whole frames read and writes their replies;
// what the socket does not take waits, and the connection reads nothing
// more until it is written (back-pressure). A request so costs one read
// instead of a goroutine's two (the second finding nothing before it may
// park) and no wake-up of its own. Measured against a goroutine per
// connection with redis-benchmark, 50 connections, CL.THROTTLE: pipelines
// of 16, 2.1–2.4 → 1.6–2.2 µs of server CPU per request and 443k → 440k–
// 640k requests/s (median 600k); pipelines of 1, 17.9 → 17.1 µs, the
// requests/s the client's (it is the bottleneck). A loop decides its
// connections' checks itself: a check that waits stalls the loop's other
// connections, so a Checker whose checks may wait on the network (a
// cluster member forwarding them) is served with Options.ConnGoroutines.
// TLS connections, and every connection elsewhere than on Linux, are
// served on a goroutine each.
//
// # Shutdown
//
// Shutdown stops accepting, lets each connection answer the commands it
// has read, closes it, and returns once every connection is closed (or
// its ctx ends; then the rest are closed at once and their checks
// canceled). A check that is canceled before the Checker takes it is not
// counted.
//
// A connection closed by the server while its client may still be
// sending (Shutdown's drain, QUIT, a protocol error) is closed gently:
// the server shuts its sending side, so that the client reads its replies
// to the end and then EOF, and reads away what the client still sends
// until the client has acknowledged every byte sent to it, closes its
// side, or a second has passed (past 256 KiB it reads no more). Closing a
// socket with input unread resets the connection, and the client would
// lose the replies it had not yet received: a client pipelining without
// pause lost the end of its replies to a drain before.
package resp
