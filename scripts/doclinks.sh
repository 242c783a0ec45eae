#!/usr/bin/env bash
# doclinks.sh: checks the front door and the manuals. README.md must stay at most 200 lines
# (issue 23: a README read in five minutes; the manuals live in docs/), and every relative link
# of README.md, PERFORMANCE.md and docs/*.md, [text](path) or ![alt](path), must name a file or
# directory that exists, relative to the page (an #anchor is left out; links inside ``` blocks,
# and http(s) and mailto links, are not checked). Prints each problem; exits 1 if there is one.
#
# Usage: scripts/doclinks.sh
set -uo pipefail
cd "$(dirname "$0")/.."

max=200
status=0

lines=$(wc -l <README.md)
if [ "$lines" -gt "$max" ]; then
	echo "README.md: $lines lines, more than $max: move the detail to a page under docs/"
	status=1
fi

# links FILE prints the target of every markdown link of FILE outside fenced code blocks.
links() {
	awk '/^[[:space:]]*```/ { fenced = !fenced; next } !fenced { print }' "$1" |
		grep -o '\]([^)[:space:]]*)' | sed 's/^](//; s/)$//'
}

for page in README.md PERFORMANCE.md docs/*.md; do
	dir=$(dirname "$page")
	while IFS= read -r target; do
		case $target in
		http://* | https://* | mailto:* | '#'*) continue ;;
		esac
		path=${target%%#*}
		if [ ! -e "$dir/$path" ]; then
			echo "$page: link to $target: no such file"
			status=1
		fi
	done < <(links "$page")
done
exit $status
