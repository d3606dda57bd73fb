package pgoutput

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"
)

// TxState follows a stream's transaction boundaries: whether a transaction
// has begun and not committed, and the end LSN of the last commit.
//
// N.B. this is what replication asks before it confirms a keepalive's WAL
// end (nothing half received, everything handed on acknowledged) and what
// decode asks to assemble transactions: the same code for both.
type TxState struct {
	open    bool
	begin   Begin
	lastEnd pglogrepl.LSN
}

// NewTxState returns the state of a stream that starts at start (the slot's
// confirmed position): no transaction open, LastEnd start.
func NewTxState(start pglogrepl.LSN) TxState { return TxState{lastEnd: start} }

// InTx reports whether a transaction has begun and not yet committed.
func (s *TxState) InTx() bool { return s.open }

// Current is the open transaction's Begin (valid while InTx).
func (s *TxState) Current() Begin { return s.begin }

// LastEnd is the end LSN of the last Commit, or the start position before
// any.
func (s *TxState) LastEnd() pglogrepl.LSN { return s.lastEnd }

// Begin takes a Begin message. A Begin inside a transaction, or a
// malformed one, is an error and leaves the state unchanged.
func (s *TxState) Begin(b []byte) (Begin, error) {
	if s.open {
		return Begin{}, fmt.Errorf("begin inside transaction %d: protocol out of sync", s.begin.Xid)
	}
	m, err := ParseBegin(b)
	if err != nil {
		return m, err
	}
	s.begin, s.open = m, true
	return m, nil
}

// Commit takes a Commit message. A Commit without a Begin, one whose
// commit LSN is not the Begin's final LSN, or a malformed one, is an error
// and leaves the state unchanged.
func (s *TxState) Commit(b []byte) (Commit, error) {
	if !s.open {
		return Commit{}, errors.New("commit without begin: protocol out of sync")
	}
	m, err := ParseCommit(b)
	if err != nil {
		return m, err
	}
	if m.CommitLSN != s.begin.FinalLSN {
		return m, fmt.Errorf("commit at %s does not match begin's final lsn %s: protocol out of sync", m.CommitLSN, s.begin.FinalLSN)
	}
	s.open, s.lastEnd = false, m.EndLSN
	return m, nil
}

// Observe takes any message: a Begin or a Commit as Begin and Commit do;
// every other kind leaves the state as it is.
func (s *TxState) Observe(b []byte) error {
	if len(b) == 0 {
		return errors.New("empty pgoutput message")
	}
	var err error
	switch b[0] {
	case KindBegin:
		_, err = s.Begin(b)
	case KindCommit:
		_, err = s.Commit(b)
	}
	return err
}

// SplitTable splits "schema.table" (or "table", meaning public) into the
// namespace and name a Relation message carries.
func SplitTable(s string) (schema, table string, err error) {
	parts := strings.Split(s, ".")
	switch {
	case len(parts) == 1 && parts[0] != "":
		return "public", parts[0], nil
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		return parts[0], parts[1], nil
	}
	return "", "", fmt.Errorf("table %q: want schema.table or table", s)
}
