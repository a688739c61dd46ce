package backup

import (
	"strconv"
	"strings"
)

// CELRule is one admission rule of a CRD field: a CEL expression over self
// and the expression of its message.
type CELRule struct {
	Rule, MessageExpression string
}

// ScheduleRules are the admission rules of spec.backup.schedule: the
// grammar ParseSchedule checks, in CEL, with the same messages. crdgen
// writes them into the CRD. What CEL cannot see (a schedule that never
// fires, such as the 31st of February) the operator reports in the
// BackingUp condition.
func ScheduleRules() []CELRule {
	fields := "self.findAll(" + celString(fieldPattern) + ")"
	descriptors := make([]string, len(Descriptors))
	for i, d := range Descriptors {
		descriptors[i] = celString(d)
	}
	control := "self.matches(" + celString(controlPattern) + ")"
	rules := []CELRule{
		{Rule: "!" + control, MessageExpression: celString(controlMessage)},
		{
			Rule:              control + " || !self.startsWith('@') || self in [" + strings.Join(descriptors, ", ") + "]",
			MessageExpression: celMessage(descriptorMessage(markA), "self"),
		},
		{
			Rule:              control + " || self.startsWith('@') || " + fields + ".size() == 5",
			MessageExpression: celMessage(fieldCountMessage(markA, markB), "self", "string("+fields+".size())"),
		},
	}
	for i, f := range scheduleFields {
		value := fields + "[" + strconv.Itoa(i) + "]"
		rules = append(rules, CELRule{
			Rule: control + " || self.startsWith('@') || " + fields + ".size() != 5 || " +
				value + ".split(',').all(item, " + f.celItem("item") + ")",
			MessageExpression: celMessage(fieldMessage(f, markA), value),
		})
	}
	return rules
}

// celItem is the CEL of scheduleField.valid for one comma-separated item.
// CEL's && absorbs the errors of its other operands once one is false, so
// int() is never the reason a malformed item is refused.
func (f scheduleField) celItem(item string) string {
	rng := item + ".split('/')[0]"
	ends := rng + ".split('-')"
	return item + ".matches(" + celString(f.itemPattern()) + ")" +
		" && (" + item + ".split('/').size() == 1 || int(" + item + ".split('/')[1]) >= 1)" +
		" && " + ends + ".all(v, v == '*' || v == '?' || (" + f.celValue("v") + " >= " + strconv.Itoa(f.lo) +
		" && " + f.celValue("v") + " <= " + strconv.Itoa(f.hi) + "))" +
		" && (" + ends + ".size() == 1 || " + f.celValue(ends+"[0]") + " <= " + f.celValue(ends+"[1]") + ")"
}

// celValue is the CEL of scheduleField.value: a number, or a name's
// place in the list (indexOf gives -1 for no name, which every field's
// bounds refuse once offset by zero).
func (f scheduleField) celValue(v string) string {
	if f.names == nil {
		return "int(" + v + ")"
	}
	names := make([]string, len(f.names))
	for i, n := range f.names {
		names[i] = celString(n)
	}
	return "(" + v + ".matches('^[0-9]+$') ? int(" + v + ") : " + strconv.Itoa(f.zero) +
		" + [" + strings.Join(names, ", ") + "].indexOf(" + v + ".lowerAscii()))"
}

// Markers stand for CEL operands in a message built by the function the
// Go parser uses, so both say the same words.
const (
	markA = "\x00" + "0" + "\x00"
	markB = "\x00" + "1" + "\x00"
)

// celMessage turns a message holding markers into a CEL concatenation with
// operands[i] in the place of marker i.
func celMessage(msg string, operands ...string) string {
	var parts []string
	for i, piece := range strings.Split(msg, "\x00") {
		if i%2 == 1 {
			n, _ := strconv.Atoi(piece)
			parts = append(parts, operands[n])
			continue
		}
		if piece != "" {
			parts = append(parts, celString(piece))
		}
	}
	return strings.Join(parts, " + ")
}

// celString quotes s as a CEL string literal.
func celString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
