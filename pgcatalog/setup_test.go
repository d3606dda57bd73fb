package pgcatalog

import (
	"strings"
	"testing"
)

// TestSetupNames: each name setup writes into SQL or pg_hba.conf is
// checked, every mistake reported at once.
func TestSetupNames(t *testing.T) {
	cases := []struct {
		name, slot, role string
		tables           []string
		want             []string // substrings of the error; none: valid
	}{
		{"valid", "walrelay", "walrelay", []string{"public.outbox"}, nil},
		{"no role", "walrelay", "", []string{"public.outbox"}, nil},
		{"no table", "walrelay", "walrelay", nil, []string{"--table is empty"}},
		{"reserved prefix", "walrelay", "pg_relay", []string{"public.outbox"}, []string{"reserved for PostgreSQL's own roles"}},
		{"keyword", "walrelay", "ALL", []string{"public.outbox"}, []string{"pg_hba.conf keyword"}},
		{"bad role and slot", "Bad-Slot", "a b", []string{"public.outbox"}, []string{`--role "a b"`, "Bad-Slot"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := SetupNames(c.slot, "walrelay", c.role, c.tables)
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one with %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestHBADatabase: a plain name is written as it is, a keyword or an
// unusual name quoted, a name pg_hba.conf cannot hold replaced.
func TestHBADatabase(t *testing.T) {
	for db, want := range map[string]string{"shop": "shop", "all": `"all"`, "Shop": `"Shop"`, `a"b`: "<database>", "my db": `"my db"`} {
		if got := HBADatabase(db); got != want {
			t.Errorf("HBADatabase(%q) = %s, want %s", db, got, want)
		}
	}
}

// TestRoleStatementsHideThePassword: the role is created with a SCRAM
// verifier, never the password, and what setup prints hides the verifier.
func TestRoleStatementsHideThePassword(t *testing.T) {
	stmts, err := RoleStatements("relay", "pw-XYZ", true, []string{"public.outbox", "app.outbox"})
	if err != nil {
		t.Fatal(err)
	}
	if len(stmts) != 3 || !strings.Contains(stmts[1].SQL, `GRANT USAGE ON SCHEMA "public"`) || !strings.Contains(stmts[2].SQL, `"app"`) {
		t.Fatalf("statements %+v: want the role and USAGE on public and app", stmts)
	}
	for _, sql := range []string{stmts[0].SQL, stmts[0].IfExists} {
		if strings.Contains(sql, "pw-XYZ") || !strings.Contains(sql, "PASSWORD 'SCRAM-SHA-256$4096:") {
			t.Errorf("%s: want a SCRAM verifier, not the password", sql)
		}
		if got := RedactPassword(sql); strings.Contains(got, "SCRAM") || !strings.HasSuffix(got, " PASSWORD '***'") {
			t.Errorf("RedactPassword(%s) = %s", sql, got)
		}
	}
}

// TestFailoverSlotGrantsTheSnapshot: with a failover slot, setup grants
// the role pg_log_standby_snapshot() and says what to run for the
// standby's pg_reload_conf(); without one, neither.
func TestFailoverSlotGrantsTheSnapshot(t *testing.T) {
	const grant = `GRANT EXECUTE ON FUNCTION pg_log_standby_snapshot() TO "relay";`
	const note = `GRANT EXECUTE ON FUNCTION pg_reload_conf() TO "relay" (or the role of --pg-standby-url);`
	for _, failover := range []bool{false, true} {
		p, err := PlanSetup("relay", "", false, "pub", "slot", []string{"public.outbox"})
		if err != nil {
			t.Fatal(err)
		}
		var plain strings.Builder
		p.Script(&plain, false)
		if strings.Contains(plain.String(), "pg_log_standby_snapshot") || strings.Contains(plain.String(), "pg_reload_conf") {
			t.Errorf("script without a failover slot names the failover grants:\n%s", plain.String())
		}
		var script strings.Builder
		if failover {
			p.FailoverSlot()
		}
		p.Script(&script, true)
		if !strings.Contains(script.String(), "-- "+grant) || !strings.Contains(script.String(), note) {
			t.Errorf("setup --print (failover slot planned: %v) does not show %q and %q:\n%s", failover, grant, note, script.String())
		}
		has := strings.Contains(script.String(), "\n"+grant+"\n")
		if has != failover {
			t.Errorf("failover slot %v: the grant is a statement of the plan: %v, want %v:\n%s", failover, has, failover, script.String())
		}
	}
}
