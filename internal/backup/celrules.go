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
	control := "self.matches(" + celString(controlPattern) + ")"
	descriptors := make([]string, len(Descriptors))
	for i, d := range Descriptors {
		descriptors[i] = celString(d)
	}
	rules := []CELRule{
		{Rule: "!" + control, MessageExpression: celString(controlMessage)},
		{
			Rule:              control + " || !self.startsWith('@') || self in [" + strings.Join(descriptors, ", ") + "]",
			MessageExpression: celMessage(descriptorMessage(markA), "self"),
		},
		{
			Rule:              control + " || self.startsWith('@') || " + fields + ".size() == 5",
			MessageExpression: celMessage(fieldCountMessage(markA), "self"),
		},
	}
	for i, f := range scheduleFields {
		value := fields + "[" + strconv.Itoa(i) + "]"
		rules = append(rules, CELRule{
			Rule: control + " || self.startsWith('@') || " + fields + ".size() != 5 || (" +
				value + ".matches(" + celString(f.pattern()) + ") && " + value + ".split(',').all(item, " + celRangeInOrder("item") + "))",
			MessageExpression: celMessage(fieldMessage(f, markA), value),
		})
	}
	return rules
}

// celRangeInOrder is the CEL of rangesInOrder for one item.
func celRangeInOrder(item string) string {
	ends := item + ".split('/')[0].split('-')"
	return "!" + item + ".matches(" + celString(numericRangePattern) + ") || int(" + ends + "[0]) <= int(" + ends + "[1])"
}

// markA stands for a CEL operand in a message built by the function the
// Go parser uses, so both say the same words.
const markA = "\x00" + "0" + "\x00"

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
