package toolkit

import (
	"context"
	"strings"

	"github.com/bubbus/bub/pkg/skills"
	"github.com/bubbus/bub/pkg/tools"
)

// skillTools is the skill tool (Bub's): a skill's location and body by
// name, or the list of the skills the turn may use.
func skillTools(opts Options) []tools.Tool {
	catalog := opts.Skills
	return []tools.Tool{withParams(tools.Tool{
		Name:            "skill",
		Effect:          tools.EffectReadOnly,
		Description:     "Load the skill content by name. Return the location and skill content. If name is not provided, list all available skills in the current workspace.",
		RequiresContext: true,
		Handler: func(ctx context.Context, tc *tools.Context, args map[string]any) (any, error) {
			name, named := args["name"].(string)
			if name != "" && !skills.Allowed(tc.State, name) {
				return "(skill '" + name + "' is not allowed in this context)", nil
			}
			list, err := catalog.Visible(ctx, tc.WorkspaceDir(), tc.State)
			if err != nil {
				return nil, err
			}
			if !named {
				lines := make([]string, len(list))
				for i, s := range list {
					lines[i] = "- " + s.Name
				}
				return "Available skills:\n" + strings.Join(lines, "\n"), nil
			}
			for _, s := range list {
				if strings.EqualFold(s.Name, name) {
					body := s.Body()
					if body == "" {
						body = "(no content)"
					}
					return "Location: " + s.Location + "\n---\n" + body, nil
				}
			}
			return "(no such skill)", nil
		},
	},
		param{name: "name", typ: "string", description: "The skill's name; leave it out to list the skills."},
	)}
}
