package cli

import "runtime/debug"

// Version is the main module's version from the build information,
// "(devel)" for a local build.
func Version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
