// Package eventdoc reads the table of docs/events.md, for the tests that
// hold the code to it (command's TestEventsTable, dashboard's
// TestEventsTableHystrixKeys).
package eventdoc

import (
	"fmt"
	"os"
	"strings"
)

// Row is one event of the table, its cells without their backquotes.
type Row struct {
	Const, Text, Label    string
	HystrixKey, NativeKey string // "" when the event has none
	Primary, FallsBack    bool   // "yes"
	Counted               bool   // the breaker column says "counts"
}

// Read returns the rows of the events table in the Markdown file path, in
// order.
func Read(path string) ([]Row, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rows []Row
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 9 {
			return nil, fmt.Errorf("%s: a row of %d cells, want 9: %s", path, len(cells), line)
		}
		for i, c := range cells {
			cells[i] = strings.Trim(strings.TrimSpace(c), "`")
		}
		rows = append(rows, Row{Const: cells[0], Text: cells[1], Label: cells[2], HystrixKey: cells[3], NativeKey: cells[4],
			Primary: cells[5] == "yes", Counted: cells[6] == "counts", FallsBack: cells[7] == "yes"})
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no events table", path)
	}
	return rows, nil
}
