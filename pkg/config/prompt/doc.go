// Package prompt holds the [hooks.Prompter]s `bub onboard` asks
// onboard_config's questions with: [Interactive] asks a person (prompts
// to a writer, answers from a reader, secret answers not echoed on a
// terminal) and [Answers] answers by question key from `--set key=value`
// pairs and `key=value` lines ([ParseAnswers]), falling back to another
// prompter or to each question's default.
//
// Either returns an error wrapping [ErrAborted] when the person ends the
// input at a prompt (Ctrl-D) or the context is cancelled (Ctrl-C); the
// caller then writes nothing.
package prompt
