package cli

import (
	"math"
	"strings"
)

// Suggest returns the candidate closest to name (an edit distance of at
// most a third of its length, at least 1, or one that starts with name or
// the other way round), or "".
func Suggest(name string, candidates []string) string {
	best, bestD := "", math.MaxInt
	for _, c := range candidates {
		d := editDistance(name, c)
		if len(name) >= 3 && (strings.HasPrefix(c, name) || strings.HasPrefix(name, c)) {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	if bestD <= max(1, len(name)/3) {
		return best
	}
	return ""
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
