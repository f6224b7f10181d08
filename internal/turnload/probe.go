package turnload

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// probes numbers the probe turns of this process, so each has a session
// of its own.
var probes atomic.Int64

// FirstAnswer posts a new turn to the ingress at web, each in a session
// of its own (probe:N), every half second until one is answered within
// its wait, and returns how long after start that answer came (-1 if
// none in 3 minutes). Started as a fault strikes, it measures how long
// the deployment made a new user wait.
func FirstAnswer(web string, start time.Time) time.Duration {
	got := make(chan time.Time, 1)
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		n := probes.Add(1)
		go func() {
			body := fmt.Sprintf(`{"content": "probe %d", "session_id": "probe:%d"}`, n, n)
			client := http.Client{Timeout: 40 * time.Second}
			resp, err := client.Post(web+"/v1/messages?wait=30s", "application/json", strings.NewReader(body))
			if err != nil {
				return
			}
			defer resp.Body.Close()
			var r struct{ Outbounds []json.RawMessage }
			if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&r) == nil && len(r.Outbounds) > 0 {
				select {
				case got <- time.Now():
				default:
				}
			}
		}()
		select {
		case at := <-got:
			return at.Sub(start)
		case <-time.After(500 * time.Millisecond):
		}
	}
	return -1
}
