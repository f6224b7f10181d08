package telegram_test

import (
	"context"
	"fmt"
	"time"

	"github.com/bubbus/bub/pkg/channels/telegram"
	"github.com/bubbus/bub/pkg/channels/telegram/telegramtest"
	"github.com/bubbus/bub/pkg/envelope"
)

// The channel against the fake Bot API: a user's comma command reaches the
// handler, a reply goes back with sendMessage.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv := telegramtest.New()
	defer srv.Close()

	inbound := make(chan *envelope.Envelope, 1)
	handler := func(_ context.Context, env *envelope.Envelope) error {
		inbound <- env
		return nil
	}
	ch, err := telegram.New(telegram.Config{Token: srv.Token(), APIBase: srv.URL()}, handler, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := ch.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer ch.Stop(ctx)

	if _, err := srv.SendUserMessage(42, ",help"); err != nil {
		fmt.Println(err)
		return
	}
	env := <-inbound
	fmt.Println(env.SessionID, env.Kind, env.OutputChannel, env.Content)

	if err := ch.Send(ctx, &envelope.Envelope{ChatID: env.ChatID, Content: `{"message":"hello"}`}); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(srv.Sent()[0].ChatID, srv.Sent()[0].Text)
	// Output:
	// telegram:42 command telegram ,help
	// 42 hello
}
