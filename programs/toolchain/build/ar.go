package build

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// bitcodeMagic starts every LLVM bitcode file ("BC" 0xC0DE).
var bitcodeMagic = []byte{'B', 'C', 0xc0, 0xde}

type member struct {
	name string
	data []byte
}

// bitcodeMembers returns the LLVM bitcode members of an rlib (a GNU ar
// archive). For the bpfel target rustc stores code as bitcode; any other object
// (from a C build script, say) cannot be linked and is an error.
func bitcodeMembers(archive []byte) ([]member, error) {
	const magic = "!<arch>\n"
	if !bytes.HasPrefix(archive, []byte(magic)) {
		return nil, fmt.Errorf("not an ar archive")
	}
	var names []byte // GNU long-name table ("//")
	var out []member
	for off := len(magic); off < len(archive); {
		if off+60 > len(archive) {
			return nil, fmt.Errorf("truncated member header at byte %d", off)
		}
		hdr := archive[off : off+60]
		if string(hdr[58:60]) != "`\n" {
			return nil, fmt.Errorf("bad member header at byte %d", off)
		}
		size, err := strconv.Atoi(strings.TrimSpace(string(hdr[48:58])))
		if err != nil || size < 0 || off+60+size > len(archive) {
			return nil, fmt.Errorf("bad member size at byte %d", off)
		}
		data := archive[off+60 : off+60+size]
		name := strings.TrimRight(string(hdr[:16]), " ")
		off += 60 + size + size%2
		switch {
		case name == "//":
			names = data
			continue
		case name == "/" || name == "/SYM64/":
			continue
		case strings.HasPrefix(name, "/"):
			i, err := strconv.Atoi(name[1:])
			if err != nil || i >= len(names) {
				return nil, fmt.Errorf("bad long member name %q", name)
			}
			end := bytes.IndexByte(names[i:], '\n')
			if end < 0 {
				return nil, fmt.Errorf("bad long member name %q", name)
			}
			name = string(names[i : i+end])
		}
		name = strings.TrimSuffix(name, "/")
		if name == "lib.rmeta" {
			continue
		}
		if !bytes.HasPrefix(data, bitcodeMagic) {
			return nil, fmt.Errorf("member %s is not LLVM bitcode (native code, e.g. from a C build script, cannot be linked into a program)", name)
		}
		out = append(out, member{name: name, data: data})
	}
	return out, nil
}
