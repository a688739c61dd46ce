package backup_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/openbao/operator/config/crd"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/crdschema"
)

// The CRD's schedule rules are generated from the grammar (crdgen); these
// tests hold the API server's answer and the operator's parser together:
// both accept the same expressions and refuse the others with the same
// words.

var scheduleCorpus = []string{
	"*/15 * * * *", "0 3 * * *", " 0 3 * * * ", "0\t3 * * *", "0 3 * * MON-fri", "0 3 ? * sun",
	"30 4 1,15 * *", "3/20 * * * *", "0 0 1 jan-dec/3 *", "@daily", "@every 1h", "@reboot", "@",
	"* * * *", "1 2 3 4 5 6", "CRON_TZ=UTC 0 3 * * *", "61 * * * *", "*/0 * * * *", "5-1 * * * *",
	"*-5 * * * *", "1,,2 * * * *", "1-2-3 * * * *", "1/2/3 * * * *", "0 24 * * *", "0 0 0 * *",
	"0 0 * 13 *", "0 0 * foo *", "0 0 * * 7", "0 0 * * fri-mon", "0 0 * * xyz", "0 0 * JAN-feb *",
	"00000 * * * *", "99999 * * * *", "1-99999 * * * *", "*/99999 * * * *", "a * * * *", "- * * * *",
	"1- * * * *", "-1 * * * *", ", * * * *", "* * * * *,", "0 0 31 2 *", "?/5 ?/5 ? ? ?", "0 0 * * 0-6/2",
	"0 0 * * sat-sat", "0 0 1-31/31 * *", "0 0 * * SUN,mon,Tue", "0 0 * * sun-7", "\u00e9 * * * *",
	"'; drop * * * *", `\ * * * *`, "0 0 * * mon-", "1//2 * * * *", "\n", "0\n3 * * *", "\x7f * * * *",
}

func admitSchedule(t testing.TB, s *crdschema.Schema, expr string) (bool, string) {
	t.Helper()
	obj := map[string]any{
		"apiVersion": "openbao.org/v1alpha1", "kind": "OpenBaoCluster",
		"metadata": map[string]any{"name": "bao", "namespace": "ns"},
		"spec": map[string]any{"version": "2.4.0", "backup": map[string]any{
			"schedule": expr, "jwtAuthRole": "backup",
			"target": map[string]any{"endpoint": "https://s3.example.com", "bucket": "backups"},
		}},
	}
	var msgs []string
	for _, e := range s.Admit(context.Background(), obj, nil) {
		if e.Field != "spec.backup.schedule" {
			t.Fatalf("%q: an error on another field: %v", expr, e)
		}
		msgs = append(msgs, e.Detail)
	}
	return len(msgs) == 0, strings.Join(msgs, "; ")
}

func loadSchema(t testing.TB) *crdschema.Schema {
	t.Helper()
	s, err := crdschema.Load(crd.OpenBaoClusters, "v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func checkAgreement(t testing.TB, s *crdschema.Schema, expr string) {
	admitted, msg := admitSchedule(t, s, expr)
	err := backup.CheckSyntax(expr)
	switch {
	case admitted && err != nil:
		t.Errorf("%q: admitted, but the operator refuses it: %v", expr, err)
	case !admitted && err == nil:
		t.Errorf("%q: refused at admission (%s), but the operator accepts it", expr, msg)
	case !admitted && msg != err.Error():
		t.Errorf("%q: different reasons\nadmission: %s\noperator:  %s", expr, msg, err)
	}
	if err == nil {
		if _, perr := backup.ParseSchedule(expr); perr != nil && !strings.Contains(perr.Error(), "never fires") {
			t.Errorf("%q: the grammar accepts it but the cron parser does not: %v", expr, perr)
		}
	}
}

func TestAdmissionAndTheOperatorAgreeOnSchedules(t *testing.T) {
	s := loadSchema(t)
	for _, expr := range scheduleCorpus {
		checkAgreement(t, s, expr)
	}
}

func TestAnEmptyScheduleMeansOnDemandOnly(t *testing.T) {
	// spec.backup.schedule is omitted for on-demand backups; the rules
	// apply only to a schedule that is there.
	obj := map[string]any{
		"apiVersion": "openbao.org/v1alpha1", "kind": "OpenBaoCluster",
		"metadata": map[string]any{"name": "bao", "namespace": "ns"},
		"spec": map[string]any{"version": "2.4.0", "backup": map[string]any{"jwtAuthRole": "backup",
			"target": map[string]any{"endpoint": "https://s3.example.com", "bucket": "backups"}}},
	}
	if errs := loadSchema(t).Admit(context.Background(), obj, nil); len(errs) > 0 {
		t.Fatalf("a backup without a schedule is refused: %v", errs.ToAggregate())
	}
}

func FuzzScheduleAdmissionAgreesWithTheParser(f *testing.F) {
	for _, expr := range scheduleCorpus {
		f.Add(expr)
	}
	s := loadSchema(f)
	f.Fuzz(func(t *testing.T, expr string) {
		if len(expr) > 128 || !utf8.ValidString(expr) {
			return // the schema's maxLength refuses it first; JSON holds only UTF-8
		}
		checkAgreement(t, s, expr)
	})
}
