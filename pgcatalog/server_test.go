package pgcatalog

import (
	"errors"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/replication"
)

func TestCheckServerVersion(t *testing.T) {
	cases := []struct {
		num               int
		version           string
		refused, untested bool
	}{
		{90624, "9.6.24", true, false},
		{130023, "13.23", true, false},
		{139999, "13.99", true, false},
		{140000, "14.0", false, false},
		{150018, "15.18 (Debian 15.18-0+deb12u1)", false, false},
		{180004, "18.4", false, false},
		{189999, "18.99", false, false},
		{190000, "19beta1", false, true},
		{200001, "20.1", false, true},
	}
	for _, c := range cases {
		t.Run(c.version, func(t *testing.T) {
			note, untested, err := checkServerVersion(c.num, c.version)
			if refused := err != nil; refused != c.refused {
				t.Fatalf("refused = %v (%v), want %v", refused, err, c.refused)
			}
			if err != nil {
				if !errors.Is(err, replication.ErrSetup) {
					t.Errorf("error %v does not wrap replication.ErrSetup (exit 2)", err)
				}
				if !strings.Contains(err.Error(), "PostgreSQL "+c.version+" is not supported") || !strings.Contains(err.Error(), "upgrade the server") {
					t.Errorf("error %q does not name the version and the fix", err)
				}
				return
			}
			if untested != c.untested {
				t.Errorf("untested = %v, want %v", untested, c.untested)
			}
			if !strings.Contains(note, c.version) {
				t.Errorf("note %q does not name the version", note)
			}
		})
	}
}

func TestCheckMessagesVersion(t *testing.T) {
	for _, c := range []struct {
		num     int
		version string
		refused bool
	}{{130023, "13.23", true}, {139999, "13.99", true}, {140000, "14.0", false}, {180004, "18.4", false}} {
		err := checkMessagesVersion(c.num, c.version)
		if (err != nil) != c.refused {
			t.Errorf("%s: refused = %v (%v), want %v", c.version, err != nil, err, c.refused)
		}
		if err != nil && (!errors.Is(err, replication.ErrSetup) || !strings.Contains(err.Error(), "--source messages needs pgoutput's messages option, PostgreSQL 14 or later")) {
			t.Errorf("%s: error %q does not wrap replication.ErrSetup or name the fix", c.version, err)
		}
	}
}
