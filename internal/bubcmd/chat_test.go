package bubcmd

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
)

// TestReadLine: lines come without their end (\n or \r\n), the last one
// also without one; a line longer than the limit is skipped whole with
// its size, and the next line is read as usual, a line of exactly the
// limit too. The reader's buffer (16 bytes here) is smaller than the
// lines, as a pasted text is than bub chat's.
func TestReadLine(t *testing.T) {
	in := "short\r\n" + strings.Repeat("a", 40) + "\n" + strings.Repeat("b", 20) + "\n\nlast"
	r := bufio.NewReaderSize(strings.NewReader(in), 16)
	type line struct {
		text string
		size int
		err  error
	}
	var got []line
	for {
		text, size, err := readLine(r, 20)
		if errors.Is(err, io.EOF) {
			break
		}
		got = append(got, line{text, size, err})
		if len(got) > 10 {
			t.Fatal("no end of input")
		}
	}
	want := []line{{"short", 6, nil}, {"", 40, errLineTooLong}, {strings.Repeat("b", 20), 20, nil}, {"", 0, nil}, {"last", 4, nil}}
	if len(got) != len(want) {
		t.Fatalf("lines %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].text != want[i].text || got[i].size != want[i].size || !errors.Is(got[i].err, want[i].err) {
			t.Errorf("line %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestChatLoopSkipsALineTooLong: a line longer than a message may take
// is not sent; bub chat says so and sends the next line (it used to stop
// with "bufio.Scanner: token too long" at 1 MiB).
func TestChatLoopSkipsALineTooLong(t *testing.T) {
	var (
		mu   sync.Mutex
		sent []string
		out  strings.Builder
	)
	in := strings.Repeat("x", maxChatLine+1) + "\nhello\n"
	err := chatLoop(context.Background(), strings.NewReader(in), &lockedWriter{w: &out}, func(context.Context, string) {}, func(_ context.Context, line string) error {
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) != 1 || sent[0] != "hello" {
		t.Errorf("sent %d lines (%.20q), want only hello", len(sent), sent)
	}
	if want := "error: the line is 8388609 bytes, more than the 8388608 a message may take; not sent"; !strings.Contains(out.String(), want) {
		t.Errorf("output %q, want %q", out.String(), want)
	}
}
