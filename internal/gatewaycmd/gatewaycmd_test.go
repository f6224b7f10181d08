package gatewaycmd

import (
	"strings"
	"testing"
	"time"
)

// TestBufferFromEnv: the debounce settings are seconds (fractions too);
// a value that is not a positive number is an error naming the variable.
func TestBufferFromEnv(t *testing.T) {
	c, err := bufferFromEnv(func(k string) string {
		return map[string]string{"BUB_DEBOUNCE_SECONDS": "0.5", "BUB_MAX_WAIT_SECONDS": "3", "BUB_ACTIVE_TIME_WINDOW": "120"}[k]
	})
	if err != nil || c.Debounce != 500*time.Millisecond || c.MaxWait != 3*time.Second || c.ActiveWindow != 2*time.Minute {
		t.Fatalf("%+v, %v", c, err)
	}
	for _, bad := range []string{"x", "-1", "0"} {
		if _, err := bufferFromEnv(func(k string) string {
			if k == "BUB_MAX_WAIT_SECONDS" {
				return bad
			}
			return ""
		}); err == nil || !strings.Contains(err.Error(), "BUB_MAX_WAIT_SECONDS") {
			t.Fatalf("%q: %v", bad, err)
		}
	}
}
