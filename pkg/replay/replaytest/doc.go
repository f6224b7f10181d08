// Package replaytest pins a plugin's behaviour on a recorded session in a
// plugin author's own `go test`: export a production session with
// `bub tape export SESSION > testdata/session.jsonl` and
//
//	func TestReplay(t *testing.T) {
//		replaytest.Run(t, "testdata/session.jsonl", myplugin.New())
//	}
//
// fails for every turn whose outbound text, tool calls or hook decisions
// differ from the recording, printing the unified diff. See package replay
// and examples/plugins/opsbot (replay_test.go).
package replaytest
