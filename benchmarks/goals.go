package main

import (
	"fmt"
	"io"
)

// goal is one of issue 33's performance goals, measured as a ratio of two
// designs within each repetition: the ratios, and the bound they must
// keep (at least, or at most).
type goal struct {
	what   string // the ratio, named
	at     string // where: callers, workload
	ratios []float64
	bound  float64
	most   bool // the ratio must stay at or below bound; else at or above
}

// met reports whether the median ratio keeps the bound.
func (g goal) met() bool {
	m := median(g.ratios)
	if g.most {
		return m <= g.bound
	}
	return m >= g.bound
}

// addGoal records a goal's measurement, printed by printGoals.
func (e *benchEnv) addGoal(g goal) {
	if len(g.ratios) > 0 {
		e.goals = append(e.goals, g)
	}
}

// printGoals writes the goals' table: each ratio beside its goal.
func printGoals(out io.Writer, goals []goal) {
	if len(goals) == 0 {
		return
	}
	fmt.Fprintln(out, "## Goals (issue 33)")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "Each ratio's median (min–max) over the repetitions, beside its goal; the sections above have the figures.")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| ratio | at | measured | goal | met |")
	fmt.Fprintln(out, "|---|---|---|---|---|")
	for _, g := range goals {
		bound := fmt.Sprintf("≥ %.2f", g.bound)
		if g.most {
			bound = fmt.Sprintf("≤ %.2f", g.bound)
		}
		met := "no"
		if g.met() {
			met = "yes"
		}
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s |\n", g.what, g.at, spread(g.ratios, "%.2f"), bound, met)
	}
	fmt.Fprintln(out)
}
