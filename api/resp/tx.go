package resp

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/tidwall/redcon"
)

// MULTI, EXEC and DISCARD: see the package documentation, Transactions.

// transaction is the state of a connection between MULTI and EXEC.
type transaction struct {
	cmds    [][][]byte // the commands queued, copied out of their reads
	bytes   int        // what they hold: their arguments, argOverhead each
	aborted bool       // a command could not be queued: EXEC runs nothing
}

// abort makes EXEC run nothing, and lets go of what is queued.
func (tx *transaction) abort() { tx.aborted, tx.cmds, tx.bytes = true, nil, 0 }

// The most a transaction queues, so that a connection's memory stays
// bounded: a command past either bound is refused and aborts it.
const (
	maxQueued      = 10000
	maxQueuedBytes = 1 << 20
	// argOverhead is what an argument holds beyond its bytes (its slice),
	// so that a transaction of empty arguments is bounded too.
	argOverhead = int(unsafe.Sizeof([]byte(nil)))
	// execPass is the most commands EXEC decides in one pass.
	execPass = 1000
)

// inTransaction serves command id of a connection inside MULTI: it queues
// it, or refuses it, and reports true; or it reports false for the
// commands answered at once (EXEC, DISCARD, MULTI, QUIT and the unknown
// ones), which command serves.
func (s *Server) inTransaction(st *session, id cmdID, args [][]byte) bool {
	switch id {
	case cmdUnknown, cmdMulti, cmdExec, cmdDiscard, cmdQuit:
		return false
	case cmdAuth, cmdHello:
		s.stats.commands.Add(1)
		st.tx.abort()
		s.replyErr(st, id, ResultInvalid, "ERR Command not allowed inside a transaction")
		return true
	}
	tx := st.tx
	size := 0
	for _, a := range args {
		size += len(a)
	}
	held := size + len(args)*argOverhead
	switch {
	case tx.aborted:
		// EXEC will run nothing: nothing more is kept.
	case len(tx.cmds) >= maxQueued || tx.bytes+held > maxQueuedBytes:
		tx.abort()
		s.replyErr(st, id, ResultInvalid, fmt.Sprintf(
			"ERR the transaction is too large: at most %d commands and %d bytes queued; EXEC will discard it",
			maxQueued, maxQueuedBytes))
		return true
	default:
		buf := make([]byte, size)
		cmd := make([][]byte, len(args))
		off := 0
		for i, a := range args {
			cmd[i] = buf[off : off+len(a) : off+len(a)]
			off += copy(cmd[i], a)
		}
		tx.cmds = append(tx.cmds, cmd)
		tx.bytes += held
	}
	s.reply(st, id, ResultQueued, redcon.AppendString(st.out, "QUEUED"))
	return true
}

// transaction answers MULTI, EXEC and DISCARD.
func (s *Server) transaction(c *frameConn, st *session, id cmdID, args [][]byte) {
	if len(args) != 1 {
		if st.tx != nil {
			st.tx.abort() // as Redis: a command refused inside MULTI aborts it
		}
		s.replyErr(st, id, ResultInvalid, wrongArity(args[0]))
		return
	}
	switch {
	case id == cmdMulti && st.tx != nil:
		s.replyErr(st, id, ResultInvalid, "ERR MULTI calls can not be nested")
	case id == cmdMulti:
		st.tx = &transaction{}
		s.reply(st, id, ResultOK, redcon.AppendOK(st.out))
	case st.tx == nil:
		s.replyErr(st, id, ResultInvalid, "ERR "+strings.ToUpper(cmdNames[id])+" without MULTI")
	case id == cmdDiscard:
		st.tx = nil
		s.reply(st, id, ResultOK, redcon.AppendOK(st.out))
	case st.tx.aborted:
		st.tx = nil
		s.replyErr(st, id, ResultInvalid, "EXECABORT Transaction discarded because of previous errors.")
	default:
		tx := st.tx
		st.tx = nil
		s.reply(st, id, ResultOK, redcon.AppendArray(st.out, len(tx.cmds)))
		for i, cmd := range tx.cmds {
			if i > 0 && i%execPass == 0 {
				s.flush(c, st)
			}
			// Each adds one reply. QUIT, the one command that returns
			// false, is never queued.
			s.command(c, st, cmd)
			tx.cmds[i] = nil
		}
	}
}
