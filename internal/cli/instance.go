package cli

import (
	"fmt"
	"os"
)

// Instance names this process in CloudEvent sources and connection names:
// BUB_INSTANCE when set, else <hostname>-<pid>.
func Instance(getenv Getenv) string {
	if v := getenv("BUB_INSTANCE"); v != "" {
		return v
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "local"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}
