// Package plural writes counts of things in English: "1 node", "2 nodes",
// "0 GPUs", "1 entry", "3 entries".
package plural

import (
	"strconv"
	"strings"
)

// Of is n and noun, the noun plural unless n is 1. A regular noun takes
// an "s"; an irregular one is given as "one|many" ("entry|entries").
func Of(n int, noun string) string {
	return strconv.Itoa(n) + " " + Noun(n, noun)
}

// Noun is noun alone, singular when n is 1, as Of writes it.
func Noun(n int, noun string) string {
	one, many, irregular := strings.Cut(noun, "|")
	switch {
	case n == 1:
		return one
	case irregular:
		return many
	}
	return one + "s"
}
