package dashboard

import (
	"bytes"
	"encoding/json"
)

// appendExtra inserts the events of Config.Extra into frame, before its
// closing ping.
func appendExtra(frame []byte, extra []any) ([]byte, error) {
	if len(extra) == 0 {
		return frame, nil
	}
	var buf bytes.Buffer
	buf.Write(frame[:len(frame)-len(ping)])
	enc := json.NewEncoder(&buf) // Encode appends '\n'; one more ends the event
	for _, v := range extra {
		buf.Write(dataPrefix)
		if err := enc.Encode(v); err != nil {
			return nil, err
		}
		buf.WriteByte('\n')
	}
	buf.Write(ping)
	return buf.Bytes(), nil
}
