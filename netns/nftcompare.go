package netns

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Comparing two nftables tables by meaning.
//
// Both sides are the kernel's own listing (`nft list table`), so that a
// rule reads the same whichever words a transaction spelled it in (the
// kernel prints `meta mark & 0x00004000 != 0x00000000` for kube-proxy's
// `mark and 0x00004000 != 0`, `timeout 1m` for `timeout 60s`, priorities
// by name). What is left to normalise, found on this host's nft 1.0.6:
//
//   - the order of a table's sets, maps and chains: the kernel lists them
//     by creation, and a table built sync by sync creates them in another
//     order than one loaded in a single transaction; blocks are sorted by
//     kind and name. The order of the rules in a chain is meaning, and kept.
//   - the order of a named set's or map's elements, which follows its
//     hashing and history (and wraps over lines): sorted, one list.
//   - the elements of a dynamic set (flags dynamic: kube-proxy's affinity
//     sets), which the kernel fills from traffic, each with its own expiry:
//     dropped.
//   - counters' packets and bytes: dropped (`counter` stays).
//
// Handles are not listed (no -a).

// nftBlock is one set, map or chain of a listing (or the table's own
// lines), its header and its lines.
type nftBlock struct {
	header string
	lines  []string
}

var nftCounter = regexp.MustCompile(`counter packets \d+ bytes \d+`)

// canonicalNFT parses `nft list table` output into its blocks, normalised
// as above and sorted by header.
func canonicalNFT(list string) []nftBlock {
	var blocks []nftBlock
	table := nftBlock{header: "table"}
	var cur *nftBlock
	var pending string // a statement whose braces are still open
	for _, raw := range strings.Split(list, "\n") {
		line := strings.TrimSpace(raw)
		if pending != "" {
			line = pending + " " + line
			pending = ""
		}
		if strings.Count(line, "{") > strings.Count(line, "}") && !isBlockHeader(line) && !strings.HasPrefix(line, "table ") {
			pending = line
			continue
		}
		switch {
		case line == "" || strings.HasPrefix(line, "table "):
		case isBlockHeader(line) && cur == nil:
			blocks = append(blocks, nftBlock{header: strings.TrimSuffix(line, " {")})
			cur = &blocks[len(blocks)-1]
		case line == "}":
			cur = nil // the end of a block, or of the table
		case cur != nil:
			cur.lines = append(cur.lines, nftCounter.ReplaceAllString(line, "counter"))
		default:
			table.lines = append(table.lines, line)
		}
	}
	for i := range blocks {
		blocks[i].lines = normaliseElements(blocks[i].lines)
	}
	slices.SortFunc(blocks, func(a, b nftBlock) int { return strings.Compare(a.header, b.header) })
	return append([]nftBlock{table}, blocks...)
}

func isBlockHeader(line string) bool {
	for _, kind := range []string{"set ", "map ", "chain "} {
		if strings.HasPrefix(line, kind) && strings.HasSuffix(line, " {") {
			return true
		}
	}
	return false
}

// normaliseElements sorts a set's or map's elements, or drops them for a
// dynamic set.
func normaliseElements(lines []string) []string {
	dynamic := false
	for _, l := range lines {
		if strings.HasPrefix(l, "flags ") && slices.Contains(strings.Split(strings.TrimPrefix(l, "flags "), ","), "dynamic") {
			dynamic = true
		}
	}
	var out []string
	for _, l := range lines {
		body, ok := strings.CutPrefix(l, "elements = {")
		if !ok {
			out = append(out, l)
			continue
		}
		if dynamic {
			continue
		}
		var elems []string
		for _, e := range strings.Split(strings.TrimSuffix(strings.TrimSpace(body), "}"), ",") {
			elems = append(elems, strings.TrimSpace(e))
		}
		slices.Sort(elems)
		out = append(out, "elements = { "+strings.Join(elems, ", ")+" }")
	}
	return out
}

// CompareNFTLists reports how got (`nft list table` of the kernel under
// test) differs by meaning from want (the same listing of the table it
// should hold), block by block; nil when they agree.
func CompareNFTLists(want, got string) error {
	w, g := blockMap(canonicalNFT(want)), blockMap(canonicalNFT(got))
	var diffs []string
	headers := map[string]bool{}
	for h := range w {
		headers[h] = true
	}
	for h := range g {
		headers[h] = true
	}
	for _, h := range slices.Sorted(maps.Keys(headers)) {
		wl, inW := w[h]
		gl, inG := g[h]
		switch {
		case !inG:
			diffs = append(diffs, h+": only in the fake")
		case !inW:
			diffs = append(diffs, h+": only in the kernel")
		case !slices.Equal(wl, gl):
			diffs = append(diffs, fmt.Sprintf("%s:\n      kernel: %s\n      fake:   %s", h, strings.Join(gl, "\n              "), strings.Join(wl, "\n              ")))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("the kernel's table differs from the fake's:\n  %s", strings.Join(diffs, "\n  "))
	}
	return nil
}

func blockMap(blocks []nftBlock) map[string][]string {
	out := map[string][]string{}
	for _, b := range blocks {
		out[b.header] = b.lines
	}
	return out
}
