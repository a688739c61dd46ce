package backup

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// The schedule grammar is a strict subset of what robfig/cron's standard
// parser takes: five fields separated by spaces or tabs, each a comma list
// of *, ?, a value or a range a-b (a <= b), each optionally /step with
// step >= 1; month and day-of-week also take three-letter names. Or one of
// the fixed descriptors. It leaves out what would make a slot ambiguous:
// @every (its times depend on when it is first read) and CRON_TZ= (every
// schedule runs in UTC). The same grammar is the CRD's admission rules
// (ScheduleRules), so the API server and the operator refuse the same
// expressions with the same words.

// Descriptors are the named schedules the grammar accepts.
var Descriptors = []string{"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}

// scheduleField is one of the five fields: the regular expression of
// its numbers (one or two digits within its bounds) and, for month and
// day-of-week, its names in order.
type scheduleField struct {
	name    string
	bounds  string // for messages
	numbers string
	names   []string
}

var scheduleFields = []scheduleField{
	{name: "minute", bounds: "0-59", numbers: `[0-5]?[0-9]`},
	{name: "hour", bounds: "0-23", numbers: `[01]?[0-9]|2[0-3]`},
	{name: "day-of-month", bounds: "1-31", numbers: `0?[1-9]|[12][0-9]|3[01]`},
	{name: "month", bounds: "1-12", numbers: `0?[1-9]|1[0-2]`,
		names: []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}},
	{name: "day-of-week", bounds: "0-6", numbers: `0?[0-6]`,
		names: []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}},
}

// stepPattern is a step of 1 to 99.
const stepPattern = `[1-9][0-9]?|0[1-9]`

// fieldPattern finds the fields: runs of anything but space and tab.
const fieldPattern = `[^ \t]+`

// controlPattern finds control characters other than tab, which no field
// holds and no message should echo.
const controlPattern = `[\x00-\x08\x0a-\x1f\x7f]`

const controlMessage = "schedule must not hold control characters other than tab"

// numericRangePattern finds an item that is a range of numbers, whose
// order the regular expression cannot check.
const numericRangePattern = `^[0-9]+-[0-9]+`

var (
	fieldRE        = regexp.MustCompile(fieldPattern)
	controlRE      = regexp.MustCompile(controlPattern)
	numericRangeRE = regexp.MustCompile(numericRangePattern)
	fieldREs       = func() []*regexp.Regexp {
		out := make([]*regexp.Regexp, len(scheduleFields))
		for i, f := range scheduleFields {
			out[i] = regexp.MustCompile(f.pattern())
		}
		return out
	}()
)

// pattern is the regular expression of a whole field: a comma list of
// items, each *, ?, a number, a range of numbers, a name or a range of
// names in order (the order of numbers is checked apart), each optionally
// with a step.
func (f scheduleField) pattern() string {
	alternatives := []string{`\*`, `\?`, "(" + f.numbers + ")(-(" + f.numbers + "))?"}
	if f.names != nil {
		alternatives = append(alternatives, "(?i:"+strings.Join(f.names, "|")+")")
		for i, n := range f.names {
			alternatives = append(alternatives, "(?i:"+n+"-("+strings.Join(f.names[i:], "|")+"))")
		}
	}
	item := "(" + strings.Join(alternatives, "|") + ")(/(" + stepPattern + "))?"
	return "^" + item + "(," + item + ")*$"
}

func (f scheduleField) describe() string {
	values := "numbers " + f.bounds
	if f.names != nil {
		values += " or names " + f.names[0] + "-" + f.names[len(f.names)-1]
	}
	return "must be made of *, ?, " + values + " and ranges a-b of those with a <= b, " +
		"each optionally with /step (1-99), separated by commas"
}

// Messages, shared word for word with the CEL rules.
func descriptorMessage(expr string) string {
	return `schedule "` + expr + `" is not one of ` + strings.Join(Descriptors, ", ") +
		" (@every is not accepted: its times would depend on when the operator reads it)"
}

func fieldCountMessage(expr string) string {
	return `schedule must have 5 fields (minute hour day-of-month month day-of-week) in UTC, or be a descriptor such as @daily: "` +
		expr + `"`
}

func fieldMessage(f scheduleField, value string) string {
	return `schedule: the ` + f.name + ` field "` + value + `" ` + f.describe()
}

// ScheduleError says why an expression is refused.
type ScheduleError struct{ Message string }

func (e *ScheduleError) Error() string { return e.Message }

// Schedule is a parsed schedule; its slots are times in UTC.
type Schedule struct {
	expr string
	spec cron.Schedule
}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// neverFiresProbe is where ParseSchedule looks for a first slot: a fixed
// time, so the answer never depends on the clock.
var neverFiresProbe = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// ParseSchedule checks expr against the grammar, parses it and refuses a
// schedule that never fires (such as the 31st of February).
func ParseSchedule(expr string) (Schedule, error) {
	if err := CheckSyntax(expr); err != nil {
		return Schedule{}, err
	}
	spec, err := cronParser.Parse(expr)
	if err != nil {
		return Schedule{}, &ScheduleError{Message: "schedule: " + err.Error()}
	}
	if spec.Next(neverFiresProbe).IsZero() {
		return Schedule{}, &ScheduleError{Message: `schedule "` + expr + `" never fires: no date matches all of its fields`}
	}
	return Schedule{expr: expr, spec: spec}, nil
}

// CheckSyntax checks expr against the grammar alone: what the API server
// checks at admission (ScheduleRules), with the same message.
func CheckSyntax(expr string) error {
	if controlRE.MatchString(expr) {
		return &ScheduleError{Message: controlMessage}
	}
	if strings.HasPrefix(expr, "@") {
		for _, d := range Descriptors {
			if expr == d {
				return nil
			}
		}
		return &ScheduleError{Message: descriptorMessage(expr)}
	}
	fields := fieldRE.FindAllString(expr, -1)
	if len(fields) != len(scheduleFields) {
		return &ScheduleError{Message: fieldCountMessage(expr)}
	}
	// Every bad field is named, in order, as the API server lists them.
	var msgs []string
	for i, f := range scheduleFields {
		if !fieldREs[i].MatchString(fields[i]) || !rangesInOrder(fields[i]) {
			msgs = append(msgs, fieldMessage(f, fields[i]))
		}
	}
	if len(msgs) > 0 {
		return &ScheduleError{Message: strings.Join(msgs, "; ")}
	}
	return nil
}

// rangesInOrder checks that each range of numbers in a field goes up.
func rangesInOrder(field string) bool {
	for _, item := range strings.Split(field, ",") {
		if !numericRangeRE.MatchString(item) {
			continue
		}
		rng, _, _ := strings.Cut(item, "/")
		a, b, _ := strings.Cut(rng, "-")
		na, _ := strconv.Atoi(a)
		nb, _ := strconv.Atoi(b)
		if na > nb {
			return false
		}
	}
	return true
}

// Next returns the first slot after t.
func (s Schedule) Next(t time.Time) time.Time { return s.spec.Next(t.UTC()) }

// IsSlot says whether t is a slot of the schedule.
func (s Schedule) IsSlot(t time.Time) bool {
	return t.Equal(t.Truncate(time.Second)) && s.Next(t.Add(-time.Second)).Equal(t)
}

// String returns the expression.
func (s Schedule) String() string { return s.expr }

// IsScheduleError says whether err is a refused expression.
func IsScheduleError(err error) bool {
	var se *ScheduleError
	return errors.As(err, &se)
}
