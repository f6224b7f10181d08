package natsx_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/bubbus/bub/internal/natstest"
	"github.com/bubbus/bub/internal/natsx"
)

// TestConnectAuthenticates connects with the credentials of ClientConfig
// to servers that require them, and is refused with wrong ones.
func TestConnectAuthenticates(t *testing.T) {
	userSrv := natstest.StartWithOptions(t, &server.Options{Users: []*server.User{{Username: "worker", Password: "s3cret"}}})
	tokenSrv := natstest.StartWithOptions(t, &server.Options{Authorization: "t0ken"})
	for _, tt := range []struct {
		name string
		cfg  natsx.ClientConfig
		ok   bool
	}{
		{name: "user and password", cfg: natsx.ClientConfig{URL: userSrv.URL, User: "worker", Password: "s3cret"}, ok: true},
		{name: "wrong password", cfg: natsx.ClientConfig{URL: userSrv.URL, User: "worker", Password: "nope"}},
		{name: "no credentials", cfg: natsx.ClientConfig{URL: userSrv.URL}},
		{name: "token", cfg: natsx.ClientConfig{URL: tokenSrv.URL, Token: "t0ken"}, ok: true},
		{name: "wrong token", cfg: natsx.ClientConfig{URL: tokenSrv.URL, Token: "guess"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			nc, err := natsx.Connect(ctx, tt.cfg, nil)
			if tt.ok {
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				defer nc.Close()
				if err := nc.Publish("ping", nil); err != nil {
					t.Fatal(err)
				}
				if err := nc.FlushTimeout(2 * time.Second); err != nil {
					t.Fatalf("authenticated connection does not work: %v", err)
				}
				return
			}
			if err == nil {
				nc.Close()
				t.Fatal("connected with bad credentials")
			}
		})
	}
}

// TestClientConfigNeverLogsSecrets: the logged form of a config hides the
// password and the token.
func TestClientConfigNeverLogsSecrets(t *testing.T) {
	c := natsx.ClientConfig{URL: "nats://x", User: "u", Password: "pw-secret", Token: "tok-secret"}
	v := c.LogValue().String()
	r := c.Redacted()
	for _, s := range []string{v, r.Password, r.Token} {
		if s == "pw-secret" || s == "tok-secret" || strings.Contains(v, "secret") {
			t.Fatalf("secret in %q / %+v", v, r)
		}
	}
}
