package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Progress draws a text progress bar: on a terminal one line redrawn in
// place, elsewhere (CI logs) one line per step. A nil *Progress draws
// nothing.
type Progress struct {
	w     io.Writer
	tty   bool
	start time.Time

	mu    sync.Mutex
	total int
	done  int
	label string
}

// NewProgress returns a bar of total steps written to w (nil = none).
func NewProgress(w io.Writer, total int) *Progress {
	if w == nil {
		return nil
	}
	p := &Progress{w: w, total: max(total, 1), start: time.Now()}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// Step marks one step done and shows label as the current activity.
func (p *Progress) Step(label string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = min(p.done+1, p.total)
	p.label = label
	p.draw()
}

// Show changes the label without advancing.
func (p *Progress) Show(label string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.label = label
	p.draw()
}

// Finish ends the bar's line.
func (p *Progress) Finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = p.total
	p.label = "done"
	p.draw()
	if p.tty {
		fmt.Fprintln(p.w)
	}
}

// Bar renders done of total steps as a bar of width cells.
func Bar(done, total, width int) string {
	if total <= 0 {
		total = 1
	}
	n := min(max(done*width/total, 0), width)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

func (p *Progress) draw() {
	line := fmt.Sprintf("%s %3d%% %5s  %s", Bar(p.done, p.total, 30), p.done*100/p.total,
		time.Since(p.start).Round(time.Second), p.label)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		return
	}
	fmt.Fprintln(p.w, line)
}
