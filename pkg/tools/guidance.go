package tools

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// UnknownToolGuidance is the text Bub's builtin before_tool_call answers
// (as a replace decision) when the model calls a tool that does not exist.
// known are the model-facing names of all agent-usable tools
// ([Registry.ModelNames]). Up to three known names similar to name (by
// difflib's ratio, cutoff 0.6, best first) are suggested; without any, a
// skill tool is recommended when hasSkillTool, else the text says that no
// similar tool is available.
func UnknownToolGuidance(name string, known []string, hasSkillTool bool) string {
	if matches := closeMatches(name, known, 3, 0.6); len(matches) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "Tool `%s` does not exist. Did you mean one of the following?", name)
		for _, m := range matches {
			b.WriteString("\n- " + m)
		}
		return b.String()
	}
	if hasSkillTool {
		return fmt.Sprintf("Tool `%s` does not exist. Invoke the `skill` tool to list available skills.", name)
	}
	return fmt.Sprintf("Tool `%s` does not exist. No similar tool is available.", name)
}

// closeMatches is Python's difflib.get_close_matches: the n candidates
// whose similarity ratio to word is at least cutoff, best first, ties by
// candidate in reverse order.
func closeMatches(word string, candidates []string, n int, cutoff float64) []string {
	type scored struct {
		ratio float64
		name  string
	}
	b := []rune(word)
	var found []scored
	for _, c := range candidates {
		if r := ratio([]rune(c), b); r >= cutoff {
			found = append(found, scored{r, c})
		}
	}
	slices.SortFunc(found, func(x, y scored) int {
		return cmp.Or(cmp.Compare(y.ratio, x.ratio), strings.Compare(y.name, x.name))
	})
	out := make([]string, 0, min(n, len(found)))
	for _, s := range found[:min(n, len(found))] {
		out = append(out, s.name)
	}
	return out
}

// ratio is difflib.SequenceMatcher(None, a, b).ratio(): twice the number
// of matched elements over the total length, where matches are found by
// recursively taking the longest common block (with difflib's tie-breaks
// and its "popular element" heuristic for b of 200 or more elements).
func ratio(a, b []rune) float64 {
	if len(a)+len(b) == 0 {
		return 1
	}
	b2j := map[rune][]int{}
	for j, r := range b {
		b2j[r] = append(b2j[r], j)
	}
	if len(b) >= 200 {
		limit := len(b)/100 + 1
		for r, idx := range b2j {
			if len(idx) > limit {
				delete(b2j, r)
			}
		}
	}
	matched := 0
	queue := [][4]int{{0, len(a), 0, len(b)}}
	for len(queue) > 0 {
		q := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		alo, ahi, blo, bhi := q[0], q[1], q[2], q[3]
		i, j, k := longestMatch(a, b, b2j, alo, ahi, blo, bhi)
		if k == 0 {
			continue
		}
		matched += k
		if alo < i && blo < j {
			queue = append(queue, [4]int{alo, i, blo, j})
		}
		if i+k < ahi && j+k < bhi {
			queue = append(queue, [4]int{i + k, ahi, j + k, bhi})
		}
	}
	return 2 * float64(matched) / float64(len(a)+len(b))
}

// longestMatch is difflib's find_longest_match without junk: the longest
// block a[i:i+k] == b[j:j+k] within the bounds, earliest in a, then
// earliest in b, extended over popular elements.
func longestMatch(a, b []rune, b2j map[rune][]int, alo, ahi, blo, bhi int) (besti, bestj, bestk int) {
	besti, bestj = alo, blo
	j2len := map[int]int{}
	for i := alo; i < ahi; i++ {
		next := map[int]int{}
		for _, j := range b2j[a[i]] {
			if j < blo {
				continue
			}
			if j >= bhi {
				break
			}
			k := j2len[j-1] + 1
			next[j] = k
			if k > bestk {
				besti, bestj, bestk = i-k+1, j-k+1, k
			}
		}
		j2len = next
	}
	for besti > alo && bestj > blo && a[besti-1] == b[bestj-1] {
		besti, bestj, bestk = besti-1, bestj-1, bestk+1
	}
	for besti+bestk < ahi && bestj+bestk < bhi && a[besti+bestk] == b[bestj+bestk] {
		bestk++
	}
	return besti, bestj, bestk
}
