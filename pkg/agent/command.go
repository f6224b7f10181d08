package agent

import (
	"context"
	"errors"
	"time"

	"github.com/bubbus/bub/pkg/bub"
	"github.com/bubbus/bub/pkg/events"
	"github.com/bubbus/bub/pkg/tools"
)

// command runs a comma command directly, without the model: the line
// resolves to a registered tool (exact runtime name) or to the shell with
// the whole line. As in Bub, the call emits tool events (so hooks
// can deny it) and then CommandFinished; a failure propagates to the
// caller.
func (a *Agent) command(ctx context.Context, r *Run, line string) (Output, error) {
	start := time.Now()
	inv, err := tools.ResolveCommand(a.tools, line)
	fin := &events.CommandFinished{Meta: r.meta(), Command: line, Name: inv.Name}
	if r.Answers != (events.Answers{}) {
		answers := r.Answers
		fin.Answers = &answers
	}
	var out string
	if err == nil {
		var res *tools.Result
		name := inv.Tool.ModelName()
		res, err = a.executeCall(ctx, r, 0, "command", tools.Call{RunID: r.RunID, Tool: name, Arguments: inv.Args}, map[string]tools.Tool{name: inv.Tool}, nil)
		if res != nil && res.Err != nil {
			err = res.Err
		}
		if err == nil {
			out = tools.RenderResult(res.Result)
		}
	}
	fin.ElapsedMS = time.Since(start).Milliseconds()
	if err != nil {
		fin.Status, fin.Output, fin.Err = events.CommandError, errorText(err), err
	} else {
		fin.Status, fin.Output = events.CommandOK, out
	}
	if _, eerr := events.Emit(context.WithoutCancel(ctx), r.Bus, fin); eerr != nil {
		err = errors.Join(err, eerr)
	}
	if err != nil {
		return Output{}, err
	}
	r.delta(0, "text", out, false)
	return Output{Text: out, OK: true}, nil
}

func errorText(err error) string {
	var be *bub.Error
	if errors.As(err, &be) {
		return be.Error()
	}
	return err.Error()
}
