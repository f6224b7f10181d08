package jsonltape

import (
	"errors"
	"fmt"
	"strings"
)

// maxBase bounds the escaped tape name, so that every file name derived
// from it (the longest is an archive's) stays under the 255 bytes file
// systems allow.
const maxBase = 200

// Suffixes of the files of one tape, appended to its base (see fileBase).
const (
	entriesSuffix = ".jsonl"          // the entries, Bub's tape file
	indexSuffix   = ".index.json"     // the sidecar: index, commit ids, watermarks
	lockSuffix    = ".lock"           // the cross-process lock, never removed
	resetSuffix   = ".jsonl.reset"    // the next entries file while a reset is written
	indexTemp     = ".index.json.tmp" // the next sidecar while it is written
	archiveDir    = "archive"         // subdirectory of archived tapes
	archiveSuffix = ".bak"            // end of an archive file name
)

const upperHex = "0123456789ABCDEF"

// fileBase maps a tape name to the base of its file names. Lowercase ASCII
// letters, digits, '_' and '-' are kept; every other byte becomes %XX
// (uppercase hex). The mapping is injective, also on case-insensitive file
// systems (uppercase letters are escaped), the base never contains '.'
// (so no tape's files collide with another's suffixed names), and Bub's
// session tape names (md5 hex "__" md5 hex) map to themselves.
func fileBase(name string) (string, error) {
	if name == "" {
		return "", errors.New("jsonltape: empty tape name")
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if kept(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(upperHex[c>>4])
		b.WriteByte(upperHex[c&0xf])
	}
	if b.Len() > maxBase {
		return "", fmt.Errorf("jsonltape: tape name %q is too long for a file name (%d bytes escaped, at most %d)", name, b.Len(), maxBase)
	}
	return b.String(), nil
}

// tapeName inverts fileBase; ok is false for a base fileBase never
// produces (a file this store did not name).
func tapeName(base string) (name string, ok bool) {
	if base == "" || len(base) > maxBase {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(base); i++ {
		c := base[i]
		if kept(c) {
			b.WriteByte(c)
			continue
		}
		if c != '%' || i+2 >= len(base) {
			return "", false
		}
		hi, lo := strings.IndexByte(upperHex, base[i+1]), strings.IndexByte(upperHex, base[i+2])
		if hi < 0 || lo < 0 || kept(byte(hi<<4|lo)) {
			return "", false // not hex, or an escape fileBase would not write
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	return b.String(), true
}

func kept(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}
