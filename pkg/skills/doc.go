// Package skills discovers Bub's skills and renders them for the model.
//
// A skill is a directory holding a SKILL.md: a YAML front matter between
// two "---" lines with a name (1-64 characters, lowercase kebab-case,
// equal to the directory's name), a description (1-1024 characters) and
// an optional flat string-to-string metadata map, followed by the
// instructions (the body). Anything else makes the skill invalid: it is
// skipped and the reason logged.
//
// Start with [New], which returns a [Catalog] over three kinds of roots,
// in precedence order: the workspace's .agents/skills (and the deprecated
// .agent/skills, with a warning) as "project", the user's
// ~/.agents/skills as "global", and the builtin directories of [Options]
// as "builtin". [Catalog.Discover] lists the valid skills, the first of
// each name winning; [Catalog.Visible] limits them to the turn state's
// allowed_skills ([Allowed]); [Catalog.Prompt] renders the block the
// agent appends to a step's system prompt ([Render]), with the body of
// every skill the prompt names as $name inlined ([Hints]).
// [Skill.Body] substitutes ${config.<dotted.path>} (through
// [Options.Config]), $SKILL_DIR and $PYTHON.
//
// Go has no Python interpreter of its own: $PYTHON is [Options.Python], or
// python3 (else python) from PATH, or left as it is when there is none.
//
// Looking for the skill tool? See package tools/toolkit. For where the
// block joins the system prompt see package agent.
package skills
