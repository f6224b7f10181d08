package bench

import (
	"fmt"
	"strings"
	"time"
)

// historyTitle is the title of the history section of BENCHMARKS.md.
const historyTitle = "History"

// historyColumns are the history's figures: the nth row (from 0) with id
// among the report's tables, under label.
var historyColumns = []struct {
	label, id string
	nth       int
}{
	{"P2 p50", "P2", 0}, {"P2 p99", "P2", 1},
	{"P3", "P3", 0}, {"P3 stored msgs", "P3·js", 0}, {"P3 stored bytes", "P3·js", 1},
	{"P4 p50", "P4", 0}, {"P4 p99", "P4", 1},
	{"P5", "P5", 0}, {"P6", "P6", 0}, {"P6·h1", "P6·h1", 0}, {"P7", "P7", 0},
	{"P8 p50", "P8", 0}, {"P8 p99", "P8", 1},
	{"P3·up", "P3·up", 0}, {"P4·up p50", "P4·up", 0}, {"P4·up p99", "P4·up", 1},
	{"P3·R3", "P3·R3", 0}, {"P4·R3 p50", "P4·R3", 0}, {"P4·R3 p99", "P4·R3", 1},
	{"P3·sync", "P3·sync", 0},
	{"P3·1cpu", "P3·1cpu", 0}, {"P4·1cpu p50", "P4·1cpu", 0}, {"P4·1cpu p99", "P4·1cpu", 1},
}

const historyIntro = "One row per `bub bench` run written to this file, oldest first, so that every change's before and after stay side by side: " +
	"each cell is the quantity the figure's goal is on, as a median over the run's repetitions: the ratio to its limit measured in the same run, the excess over that limit (P8), or the value itself (P6, the stored messages and bytes per turn); " +
	"✗ marks a missed goal, — a figure the run did not measure. " +
	"Rows measured on different days are not comparable figure by figure (this machine's speed varies by tens of percent); ratios within a row are."

// HistoryRows returns the rows of the history table of a BENCHMARKS.md
// (nil when it has none), each a markdown table line.
func HistoryRows(md []byte) []string {
	var rows []string
	in, header := false, 0
	for line := range strings.Lines(string(md)) {
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, "## "):
			in, header = line == "## "+historyTitle, 0
		case in && strings.HasPrefix(line, "|"):
			if header < 2 { // the column names and the separator
				header++
				continue
			}
			rows = append(rows, line)
		}
	}
	return rows
}

// AddHistory appends the section historyTitle to the report: the rows of
// earlier runs, then this run's.
func (r *Report) AddHistory(earlier []string) {
	var b strings.Builder
	b.WriteString(historyIntro + "\n\n| date | commit | mode |")
	for _, c := range historyColumns {
		b.WriteString(" " + c.label + " |")
	}
	b.WriteString("\n| --- | --- | --- |" + strings.Repeat(" --- |", len(historyColumns)) + "\n")
	for _, row := range earlier {
		b.WriteString(row + "\n")
	}
	b.WriteString(r.historyRow() + "\n")
	r.Sections = append(r.Sections, Section{Title: historyTitle, Body: b.String()})
}

// historyRow is this run's line of the history table.
func (r *Report) historyRow() string {
	commit, dirty := strings.CutSuffix(r.Commit, "+dirty")
	commit = commit[:min(len(commit), 7)]
	if dirty {
		commit += "+dirty"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| %s | %s | %s |", r.Date.UTC().Format(time.DateOnly+" 15:04"), orDash(commit), r.Mode)
	for _, c := range historyColumns {
		b.WriteString(" " + historyCell(r.row(c.id, c.nth)) + " |")
	}
	return b.String()
}

// row returns the nth row with id, nil when there is none.
func (r *Report) row(id string, nth int) *Row {
	for i := range r.Tables {
		for j := range r.Tables[i].Rows {
			if row := &r.Tables[i].Rows[j]; row.ID == id {
				if nth == 0 {
					return row
				}
				nth--
			}
		}
	}
	return nil
}

// historyCell is the quantity a row's goal is on: its ratio median for a
// goal stated as a ratio, its excess over the limit for a goal that adds
// to the limit, else its value median; marked ✗ when the goal was missed.
func historyCell(row *Row) string {
	if row == nil || row.Value.N == 0 {
		return "—"
	}
	var s string
	switch {
	case row.Ratio.N > 0 && strings.Contains(row.Goal, "×"):
		s = fmt.Sprintf("%.2f×", row.Ratio.Median)
	case row.Over.N > 0:
		s = "+" + statCell(Stat{Median: row.Over.Median, N: 1}, row.Unit)
	default:
		s = statCell(Stat{Median: row.Value.Median, N: 1}, row.Unit)
	}
	if row.Result == Fail {
		s += " ✗"
	}
	return s
}
