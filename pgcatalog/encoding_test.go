package pgcatalog

import (
	"errors"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/replication"
)

func TestCheckEncoding(t *testing.T) {
	cases := []struct {
		enc      string
		messages bool
		want     string // in the note, or in the error when refused
		refused  bool
	}{
		{"UTF8", false, "UTF8", false},
		{"UTF8", true, "UTF8", false},
		{"LATIN1", false, "LATIN1: PostgreSQL converts each row to UTF-8", false},
		{"WIN1252", false, "WIN1252: PostgreSQL converts", false},
		{"LATIN1", true, "--source messages needs a UTF8 database", true},
		{"EUC_JP", true, "database encoding EUC_JP", true},
		{"SQL_ASCII", false, "ENCODING 'UTF8'", true},
		{"SQL_ASCII", true, "database encoding SQL_ASCII", true},
	}
	for _, c := range cases {
		t.Run(c.enc, func(t *testing.T) {
			note, err := checkEncoding(c.enc, c.messages)
			if c.refused {
				if !errors.Is(err, replication.ErrSetup) || !strings.Contains(err.Error(), c.want) {
					t.Errorf("checkEncoding(%q, %v) = %q, %v; want a setup error with %q", c.enc, c.messages, note, err, c.want)
				}
				return
			}
			if err != nil || !strings.Contains(note, c.want) {
				t.Errorf("checkEncoding(%q, %v) = %q, %v; want a note with %q", c.enc, c.messages, note, err, c.want)
			}
		})
	}
}
