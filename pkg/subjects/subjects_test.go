package subjects

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestGoldenNames(t *testing.T) {
	n := Default()
	acme, err := New("acme-prod")
	if err != nil {
		t.Fatal(err)
	}
	golden := []struct{ got, want string }{
		{n.Inbound("http"), "bub.inbound.http"},
		{n.InboundAll(), "bub.inbound.>"},
		{n.Event("telegram:123", "tool_call.started"), "bub.events.telegram_3a123.tool_call.started"},
		{n.EventsOf("a.b c"), "bub.events.a_2eb_20c.>"},
		{n.EventsAll(), "bub.events.>"},
		{n.EventsOfType("run.finished"), "bub.events.*.run.finished"},
		{n.Tape("cli:local"), "bub.tape.cli_3alocal"},
		{n.TapesAll(), "bub.tape.*"},
		{n.TapeArchive("s"), "bub.tape-archive.s"},
		{n.TapeArchivesAll(), "bub.tape-archive.>"},
		{n.Outbound("http", "s1"), "bub.outbound.http.s1"},
		{n.OutboundAll(), "bub.outbound.>"},
		{n.OutboundOfChannel("cli"), "bub.outbound.cli.*"},
		{n.TokenStream("s", "run-1"), "bub.stream.s.run-1"},
		{n.TokenStreamOf("s"), "bub.stream.s.*"},
		{n.Steer("s"), "bub.steer.s"},
		{n.SteerAll(), "bub.steer.*"},
		{n.ControlQuit("cli:local"), "bub.control.quit.cli_3alocal"},
		{n.ControlQuitAll(), "bub.control.quit.*"},
		{n.Hook("policy", "before_tool_call"), "bub.hook.policy.before_tool_call"},
		{n.HookService("policy"), "bub.hook.policy"},
		{n.HookAll(), "bub.hook.>"},
		{n.WorkerShells("host-1-w0"), "bub.worker.host-1-w0.shell"},
		{n.WorkerShells("a.b"), "bub.worker.a_2eb.shell"},
		{n.WorkerShellsAll(), "bub.worker.*.shell"},
		{n.WorkerHooks(), "bub.worker.hooks"},
		{acme.WorkerHooks(), "acme-prod.worker.hooks"},
		{n.HookReporters(), "bub-hook-reporters"},
		{n.Service("worker"), "bub-worker"},
		{acme.Service("recorder"), "acme-prod-recorder"},
		{n.ServiceStatus("worker", "host-1-w0"), "bub.service.worker.host-1-w0.status"},
		{n.ServiceStatus("ingress", "a.b"), "bub.service.ingress.a_2eb.status"},
		{n.ShellOwnerKey("bash-1234abcd"), "shell.bash-1234abcd"},
		{n.DLQ("undecodable"), "bub.dlq.undecodable"},
		{n.DLQAll(), "bub.dlq.>"},
		{n.InboundStream(), "BUB_INBOUND"},
		{n.EventsStream(), "BUB_EVENTS"},
		{n.TapesStream(), "BUB_TAPES"},
		{n.OutboundStream(), "BUB_OUTBOUND"},
		{n.SteerStream(), "BUB_STEER"},
		{n.DLQStream(), "BUB_DLQ"},
		{n.WorkerConsumer(), "workers"},
		{n.RecorderConsumer(), "recorder"},
		{n.GatewayConsumer("telegram"), "gateway-telegram"},
		{n.GatewayConsumer("mcp.lifecycle"), "gateway-mcp_2elifecycle"},
		{n.DeliveredBucket(), "bub_delivered"},
		{acme.DeliveredBucket(), "acme_prod_delivered"},
		{n.DeliveredKey("telegram", "01H/out/0"), "telegram.01H_2fout_2f0"},
		{n.StateBucket(), "bub_state"},
		{n.TurnsBucket(), "bub_turns"},
		{n.TapeIndexBucket(), "bub_tape_index"},
		{n.TapeIndex("cli:local"), "bub.tape-index.cli_3alocal"},
		{n.TapeIndexesAll(), "bub.tape-index.*"},
		{acme.Inbound("http"), "acme-prod.inbound.http"},
		{acme.EventsStream(), "ACME_PROD_EVENTS"},
		{acme.TurnsBucket(), "acme_prod_turns"},
		{n.TurnKeysOfSession("cli:local"), "cli_3alocal.*.*"},
		{n.TurnSessionKeys(), "*.*.*"},
		{n.DirectGet("", "KV_bub_turns"), "$JS.API.DIRECT.GET.KV_bub_turns"},
		{n.DirectGet("hub", "KV_bub_turns"), "$JS.hub.API.DIRECT.GET.KV_bub_turns"},
		{n.MsgGet("", "BUB_TAPES"), "$JS.API.STREAM.MSG.GET.BUB_TAPES"},
		{n.MsgGet("hub", "BUB_TAPES"), "$JS.hub.API.STREAM.MSG.GET.BUB_TAPES"},
		{n.KVPut("", "bub_turns", "done.x"), "$KV.bub_turns.done.x"},
		{n.KVPut("hub", "bub_turns", "done.x"), "$JS.hub.API.$KV.bub_turns.done.x"},
		{n.TurnRunKey("cli:local", "e1"), "cli_3alocal.run.e1"},
		{n.TurnRunKeys("s"), "s.run.*"},
		{n.TurnWaitKey("s", 42), "s.wait.00000000000000000042"},
		{n.SteerClaimKey("s", 7), "s.steer.00000000000000000007"},
		{n.SteerQueuedKey("s", 7), "s.queued.00000000000000000007"},
		{n.DoneKey("01H/x"), "done.01H_2fx"},
		{n.KVKeySubject("bub_turns", "s.run.e1"), "$KV.bub_turns.s.run.e1"},
		{n.KVStream("bub_turns"), "KV_bub_turns"},
		{n.MaxDeliveriesAdvisory("BUB_INBOUND", "workers"), "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.BUB_INBOUND.workers"},
		{n.DLQWatchers(), "bub-dlq-watchers"},
	}
	for _, g := range golden {
		if g.got != g.want {
			t.Errorf("got %q, want %q", g.got, g.want)
		}
	}
}

func TestInvalidPrefix(t *testing.T) {
	for _, p := range []string{"Bub", "1bub", "bub.x", "bub x", strings.Repeat("a", 33)} {
		if _, err := New(p); err == nil {
			t.Errorf("prefix %q accepted", p)
		}
	}
}

func TestTokenIsInjectiveAndSubjectSafe(t *testing.T) {
	ids := []string{"", "_", "__", "a", "A", "telegram:123", "cli:local", "a.b c", "a_2eb", "a*>", "ü", "x\x00y", "-", "_5f"}
	seen := map[string]string{}
	for _, id := range ids {
		tok := Token(id)
		if prev, dup := seen[tok]; dup {
			t.Fatalf("%q and %q share token %q", prev, id, tok)
		}
		seen[tok] = id
		if tok == "" || strings.ContainsAny(tok, ".*> \t\r\n") {
			t.Fatalf("token %q of %q is not subject-safe", tok, id)
		}
		back, err := ParseToken(tok)
		if err != nil || back != id {
			t.Fatalf("ParseToken(%q) = %q, %v; want %q", tok, back, err, id)
		}
	}
	for _, bad := range []string{"", "_4", "_zz", "_41", "a.b"} {
		if _, err := ParseToken(bad); err == nil {
			t.Errorf("ParseToken(%q) accepted", bad)
		}
	}
}

func FuzzToken(f *testing.F) {
	for _, s := range []string{"", "telegram:123", "a.b c", "_", "ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok := Token(s)
		if tok == "" || strings.ContainsAny(tok, ".*> \t\r\n") {
			t.Fatalf("token %q of %q is not subject-safe", tok, s)
		}
		back, err := ParseToken(tok)
		if err != nil || back != s {
			t.Fatalf("round trip of %q: %q, %v", s, back, err)
		}
		if s2, err := ParseToken(s); err == nil && Token(s2) != s {
			t.Fatalf("ParseToken accepted non-canonical %q", s)
		}
	})
}

// TestNoNATSNameLiteralsOutsideThisPackage enforces that every
// subject, stream and bucket name is built here.
func TestNoNATSNameLiteralsOutsideThisPackage(t *testing.T) {
	root := filepath.Join("..", "..")
	literal := regexp.MustCompile(`^(bub|\$SRV|\$JS)\.[A-Za-z_*>]|^BUB_(INBOUND|EVENTS|TAPES|OUTBOUND|STEER|DLQ)$|^bub_(state|turns|tape_index|delivered)$`)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "testdata" || path == filepath.Join(root, "pkg", "subjects") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && literal.MatchString(s) {
				t.Errorf("%s: NATS name literal %q; build it with pkg/subjects", path, s)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
