// Package sbpf links one relocatable eBPF object (from llc-22 or clang-19) into
// an SBPF v0 shared object that Solana's BPF loaders accept.
//
// Upstream linkers cannot do this (ld.lld rejects e_machine 247 with -shared and
// GNU bpf-ld has no -shared), so this package resolves every relocation
// statically and emits only what the loader reads: one .text, one .rodata, and
// dynamic tables whose only relocations are syscall calls, resolved by the loader
// through the murmur3 hash of the syscall name.
package sbpf

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/ianlancetaylor/demangle"
)

// mmRegionSize is where the VM maps the program image: VM address =
// mmRegionSize + file offset, since sh_addr == sh_offset for every section.
const mmRegionSize = 1 << 32

// ELF relocation types of the BPF backend (llvm/BinaryFormat/ELFRelocs/BPF.def).
const (
	rBPFNone  = 0
	rBPF64_64 = 1 // lddw: absolute address split across the two imm halves
	rBPFAbs64 = 2 // 64-bit data word: pointer tables in rodata
	rBPF64_32 = 10
)

const (
	insnSize    = 8
	opLddw      = 0x18
	opCall      = 0x85
	opCallx     = 0x8d
	ehdrSize    = 64
	phdrSize    = 56
	shdrSize    = 64
	symSize     = 24
	relSize     = 16
	dynSize     = 16
	segmentAlig = 0x1000
	maxAlign    = 0x1000
)

// Options configures Link.
type Options struct {
	// Entrypoint is the exported function the loader starts at; "entrypoint"
	// when empty.
	Entrypoint string
}

// Output is a linked program.
type Output struct {
	SO         []byte   // the shared object, ready to deploy
	Syscalls   []string // syscalls the program calls, sorted
	TextSize   int      // bytes of code
	RodataSize int      // bytes of read-only data
}

type region int

const (
	regionNone region = iota
	regionText
	regionRodata
)

// placement says where an input section landed in the merged output regions.
type placement struct {
	region region
	offset uint64 // within the region
}

type linker struct {
	file    *elf.File
	syms    []elf.Symbol // index i is ELF symbol i+1 (debug/elf drops the null symbol)
	place   map[int]placement
	text    []byte
	rodata  []byte
	textOff uint64 // file offset (and sh_addr) of .text
	roOff   uint64
	// syscall call sites: offset within .text -> syscall name
	syscallSites map[uint64]string
}

// Link turns one relocatable BPF object into an SBPF v0 shared object. Errors
// name the function (demangled) whose code caused them.
func Link(object []byte, opts Options) (*Output, error) {
	if opts.Entrypoint == "" {
		opts.Entrypoint = "entrypoint"
	}
	f, err := elf.NewFile(bytes.NewReader(object))
	if err != nil {
		return nil, fmt.Errorf("read object: %w", err)
	}
	if f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB || f.Type != elf.ET_REL || f.Machine != elf.EM_BPF {
		return nil, fmt.Errorf("object is not a little-endian 64-bit relocatable eBPF object (class %v, data %v, type %v, machine %v)",
			f.Class, f.Data, f.Type, f.Machine)
	}
	syms, err := f.Symbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return nil, fmt.Errorf("read symbols: %w", err)
	}
	l := &linker{file: f, syms: syms, place: map[int]placement{}, syscallSites: map[uint64]string{}}
	if err := l.layout(); err != nil {
		return nil, err
	}
	if err := l.relocate(); err != nil {
		return nil, err
	}
	if err := l.checkInstructions(); err != nil {
		return nil, err
	}
	entry, err := l.entrypoint(opts.Entrypoint)
	if err != nil {
		return nil, err
	}
	so, names := l.emit(opts.Entrypoint, entry)
	return &Output{SO: so, Syscalls: names, TextSize: len(l.text), RodataSize: len(l.rodata)}, nil
}

// layout merges executable sections into .text and read-only data into .rodata,
// in input order so that output is a pure function of the input.
func (l *linker) layout() error {
	for i, s := range l.file.Sections {
		if s.Flags&elf.SHF_ALLOC == 0 || s.Size == 0 {
			continue
		}
		relro := strings.HasPrefix(s.Name, ".data.rel.ro")
		if s.Type == elf.SHT_NOBITS || (s.Flags&elf.SHF_WRITE != 0 && !relro) {
			return fmt.Errorf("writable section %s (%d bytes) holds %s: SBPF programs cannot have mutable globals (static mut, or a static with interior mutability); keep state in accounts",
				s.Name, s.Size, l.symbolsIn(i))
		}
		if s.Type != elf.SHT_PROGBITS {
			return fmt.Errorf("unsupported allocated section %s of type %v", s.Name, s.Type)
		}
		data, err := s.Data()
		if err != nil {
			return fmt.Errorf("read section %s: %w", s.Name, err)
		}
		align := max(s.Addralign, 1)
		if align > maxAlign || align&(align-1) != 0 {
			return fmt.Errorf("section %s asks for alignment %d; at most %d (a power of two) is supported", s.Name, s.Addralign, maxAlign)
		}
		if s.Flags&elf.SHF_EXECINSTR != 0 {
			if len(data)%insnSize != 0 {
				return fmt.Errorf("code section %s is %d bytes, not a whole number of instructions", s.Name, len(data))
			}
			l.text = padTo(l.text, max(align, insnSize))
			l.place[i] = placement{regionText, uint64(len(l.text))}
			l.text = append(l.text, data...)
		} else {
			l.rodata = padTo(l.rodata, align)
			l.place[i] = placement{regionRodata, uint64(len(l.rodata))}
			l.rodata = append(l.rodata, data...)
		}
	}
	if len(l.text) == 0 {
		return errors.New("object has no code")
	}
	l.textOff = alignUp(ehdrSize+phdrSize*l.phdrCount(), insnSize)
	l.roOff = alignUp(l.textOff+uint64(len(l.text)), 8)
	return nil
}

func (l *linker) phdrCount() uint64 {
	if len(l.rodata) > 0 {
		return 4
	}
	return 3
}

// symbolsIn lists the (demangled) symbols defined in section i, for errors.
func (l *linker) symbolsIn(i int) string {
	var names []string
	for _, s := range l.syms {
		if int(s.Section) == i && s.Name != "" && elf.ST_TYPE(s.Info) != elf.STT_SECTION {
			names = append(names, demangle.Filter(s.Name))
		}
	}
	if len(names) == 0 {
		return "unnamed data"
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// fileAddr is the output file offset (= sh_addr) of a placed section.
func (l *linker) fileAddr(p placement) uint64 {
	if p.region == regionText {
		return l.textOff + p.offset
	}
	return l.roOff + p.offset
}

// funcAt names the function containing byte off of input section sec.
func (l *linker) funcAt(sec int, off uint64) string {
	best, bestVal := "", uint64(0)
	for _, s := range l.syms {
		if int(s.Section) != sec || elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value > off {
			continue
		}
		if best == "" || s.Value >= bestVal {
			best, bestVal = s.Name, s.Value
		}
	}
	if best == "" {
		return fmt.Sprintf("%s+%#x", l.file.Sections[sec].Name, off)
	}
	return demangle.Filter(best)
}

func (l *linker) relocate() error {
	for _, rs := range l.file.Sections {
		if rs.Type == elf.SHT_RELA {
			if p, ok := l.place[int(rs.Info)]; ok && p.region != regionNone {
				return fmt.Errorf("section %s uses RELA relocations, which the BPF backend never emits", rs.Name)
			}
			continue
		}
		if rs.Type != elf.SHT_REL {
			continue
		}
		target := int(rs.Info)
		p, ok := l.place[target]
		if !ok {
			continue // debug info and other sections that are not loaded
		}
		data, err := rs.Data()
		if err != nil {
			return fmt.Errorf("read %s: %w", rs.Name, err)
		}
		if len(data)%relSize != 0 {
			return fmt.Errorf("relocation section %s has a truncated entry", rs.Name)
		}
		for i := 0; i < len(data); i += relSize {
			off := binary.LittleEndian.Uint64(data[i:])
			info := binary.LittleEndian.Uint64(data[i+8:])
			if err := l.apply(target, p, off, uint32(info>>32), uint32(info)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l *linker) apply(sec int, p placement, off uint64, symIdx, typ uint32) error {
	secSize := l.file.Sections[sec].Size
	fn := func() string { return l.funcAt(sec, off) }
	if typ == rBPFNone {
		return nil
	}
	if symIdx == 0 || int(symIdx) > len(l.syms) {
		return fmt.Errorf("relocation at %s+%#x names symbol %d, which does not exist", l.file.Sections[sec].Name, off, symIdx)
	}
	sym := l.syms[symIdx-1]
	var buf []byte
	if p.region == regionText {
		buf = l.text
	} else {
		buf = l.rodata
	}
	loc := p.offset + off
	undefined := sym.Section == elf.SHN_UNDEF
	symAddr := func() (uint64, error) {
		tp, ok := l.place[int(sym.Section)]
		if !ok {
			return 0, fmt.Errorf("%s refers to %s, which is not in a loaded section", fn(), demangle.Filter(sym.Name))
		}
		return l.fileAddr(tp) + sym.Value, nil
	}
	switch typ {
	case rBPF64_64:
		if p.region != regionText || off+2*insnSize > secSize || buf[loc] != opLddw {
			return fmt.Errorf("%s: R_BPF_64_64 relocation not on an lddw instruction", fn())
		}
		if undefined {
			return fmt.Errorf("%s takes the address of %s, which is not defined in the program", fn(), demangle.Filter(sym.Name))
		}
		s, err := symAddr()
		if err != nil {
			return err
		}
		addr := mmRegionSize + s + uint64(binary.LittleEndian.Uint32(buf[loc+4:]))
		binary.LittleEndian.PutUint32(buf[loc+4:], uint32(addr))
		binary.LittleEndian.PutUint32(buf[loc+12:], uint32(addr>>32))
	case rBPFAbs64:
		if p.region != regionRodata || off+8 > secSize {
			return fmt.Errorf("%s: 64-bit absolute relocation outside read-only data", fn())
		}
		if undefined {
			return fmt.Errorf("read-only data %s points to %s, which is not defined in the program", fn(), demangle.Filter(sym.Name))
		}
		s, err := symAddr()
		if err != nil {
			return err
		}
		addend := binary.LittleEndian.Uint64(buf[loc:])
		binary.LittleEndian.PutUint64(buf[loc:], mmRegionSize+s+addend)
	case rBPF64_32:
		if p.region != regionText || off+insnSize > secSize || buf[loc] != opCall {
			return fmt.Errorf("%s: R_BPF_64_32 relocation not on a call instruction", fn())
		}
		if undefined {
			if !IsSyscall(sym.Name) {
				return fmt.Errorf("%s calls %s, which is neither defined in the program nor a known syscall (check the name; see sbpf.Syscalls)", fn(), demangle.Filter(sym.Name))
			}
			binary.LittleEndian.PutUint32(buf[loc+4:], 0xffffffff)
			l.syscallSites[loc] = sym.Name
			return nil
		}
		tp, ok := l.place[int(sym.Section)]
		if !ok || tp.region != regionText {
			return fmt.Errorf("%s calls %s, which is not code", fn(), demangle.Filter(sym.Name))
		}
		imm := int64(int32(binary.LittleEndian.Uint32(buf[loc+4:])))
		target := int64(tp.offset+sym.Value) + (imm+1)*insnSize
		rel := (target - int64(loc) - insnSize) / insnSize
		binary.LittleEndian.PutUint32(buf[loc+4:], uint32(int32(rel)))
	default:
		return fmt.Errorf("%s: unsupported relocation type %d", fn(), typ)
	}
	return nil
}

// textFuncAt names the function containing byte off of the merged .text.
func (l *linker) textFuncAt(off uint64) string {
	for i, p := range l.place {
		if p.region != regionText {
			continue
		}
		size := l.file.Sections[i].Size
		if off >= p.offset && off < p.offset+size {
			return l.funcAt(i, off-p.offset)
		}
	}
	return fmt.Sprintf(".text+%#x", off)
}

// checkInstructions rejects anything SBPF v0 does not execute and applies the
// callx fix: LLVM encodes callx's register in dst, SBPF v0 reads it from imm.
func (l *linker) checkInstructions() error {
	n := uint64(len(l.text)) / insnSize
	for i := uint64(0); i < n; i++ {
		at := i * insnSize
		insn := l.text[at : at+insnSize]
		op := insn[0]
		offField := int16(binary.LittleEndian.Uint16(insn[2:]))
		imm := int32(binary.LittleEndian.Uint32(insn[4:]))
		switch {
		case op == opLddw:
			if i+1 >= n || l.text[at+insnSize] != 0 {
				return fmt.Errorf("%s: truncated lddw instruction at .text+%#x", l.textFuncAt(at), at)
			}
			i++
			continue
		case op == opCall:
			if imm == -1 {
				if _, ok := l.syscallSites[at]; !ok {
					return fmt.Errorf("%s: call at .text+%#x has no target (an unresolved function)", l.textFuncAt(at), at)
				}
				continue
			}
			if target := int64(i) + 1 + int64(imm); target < 0 || target >= int64(n) {
				return fmt.Errorf("%s: call at .text+%#x jumps outside the program", l.textFuncAt(at), at)
			}
			continue
		case op == opCallx:
			dst := insn[1] & 0x0f
			if imm == 0 && dst != 0 {
				binary.LittleEndian.PutUint32(insn[4:], uint32(dst))
				insn[1] &^= 0x0f
			}
			continue
		}
		if why := invalidV0(op, offField); why != "" {
			return fmt.Errorf("%s: instruction %#02x at .text+%#x is %s; SBPF v0 does not have it (build with llc -mcpu=v2 and avoid the construct)",
				l.textFuncAt(at), op, at, why)
		}
	}
	return nil
}

// invalidV0 says why an opcode is not SBPF v0, or "" when it is valid.
func invalidV0(op byte, off int16) string {
	class := op & 0x07
	switch class {
	case 0x04, 0x07: // ALU32, ALU64
		code := op & 0xf0
		switch code {
		case 0x00, 0x10, 0x20, 0x40, 0x50, 0x60, 0x70, 0x80, 0xa0, 0xc0:
			return ""
		case 0x30, 0x90: // div, mod: off != 0 selects the cpu-v4 signed forms
			if off != 0 {
				return "a signed division (cpu v4)"
			}
			return ""
		case 0xb0: // mov: off != 0 selects cpu-v4 sign-extending moves
			if off != 0 {
				return "a sign-extending move (cpu v4)"
			}
			return ""
		case 0xd0: // endianness
			if class == 0x04 {
				return ""
			}
			return "an unconditional byte swap (cpu v4)"
		}
		return "an unknown ALU operation"
	case 0x05: // JMP
		switch op {
		case 0x05, 0x15, 0x1d, 0x25, 0x2d, 0x35, 0x3d, 0x45, 0x4d, 0x55, 0x5d,
			0x65, 0x6d, 0x75, 0x7d, 0x95, 0xa5, 0xad, 0xb5, 0xbd, 0xc5, 0xcd, 0xd5, 0xdd:
			return ""
		}
		return "an unknown jump"
	case 0x06:
		return "a 32-bit jump (JMP32, cpu v3)"
	case 0x01: // LDX
		switch op {
		case 0x61, 0x69, 0x71, 0x79:
			return ""
		}
		return "a sign-extending or unknown load (cpu v4)"
	case 0x02: // ST
		switch op {
		case 0x62, 0x6a, 0x72, 0x7a:
			return ""
		}
	case 0x03: // STX
		switch op {
		case 0x63, 0x6b, 0x73, 0x7b:
			return ""
		}
		if op&0xe0 == 0xc0 {
			return "an atomic operation"
		}
	case 0x00:
		return "a legacy packet load"
	}
	return "an unknown opcode"
}

func (l *linker) entrypoint(name string) (uint64, error) {
	for _, s := range l.syms {
		if s.Name != name || s.Section == elf.SHN_UNDEF {
			continue
		}
		p, ok := l.place[int(s.Section)]
		if !ok || p.region != regionText || elf.ST_TYPE(s.Info) != elf.STT_FUNC {
			return 0, fmt.Errorf("%s is not a function in the program code", name)
		}
		return l.fileAddr(p) + s.Value, nil
	}
	return 0, fmt.Errorf("the program has no %q function: export it with #[no_mangle] pub extern \"C\" fn %s (the SDK's entrypoint! macro does this)", name, name)
}

// emit writes the shared object: ELF header, program headers, .text, .rodata,
// .dynamic, .dynsym, .dynstr, .rel.dyn, .shstrtab, section headers.
func (l *linker) emit(entryName string, entry uint64) ([]byte, []string) {
	sites := make([]uint64, 0, len(l.syscallSites))
	seen := map[string]bool{}
	var names []string
	for at, name := range l.syscallSites {
		sites = append(sites, at)
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	sort.Slice(sites, func(i, j int) bool { return sites[i] < sites[j] })
	sort.Strings(names)

	// .dynstr and .dynsym: null, the entrypoint, then one undefined symbol per syscall.
	dynstr := []byte{0}
	strOff := func(s string) uint32 {
		o := uint32(len(dynstr))
		dynstr = append(append(dynstr, s...), 0)
		return o
	}
	type dsym struct {
		name        uint32
		info        byte
		shndx       uint16
		value, size uint64
	}
	dsyms := []dsym{{}, {name: strOff(entryName), info: byte(elf.STB_GLOBAL)<<4 | byte(elf.STT_FUNC), shndx: 1, value: entry}}
	symIndex := map[string]uint32{}
	for _, n := range names {
		symIndex[n] = uint32(len(dsyms))
		dsyms = append(dsyms, dsym{name: strOff(n), info: byte(elf.STB_GLOBAL)<<4 | byte(elf.STT_NOTYPE)})
	}

	hasRo := len(l.rodata) > 0
	dynamicOff := alignUp(l.roOff+uint64(len(l.rodata)), 8)
	if !hasRo {
		dynamicOff = alignUp(l.textOff+uint64(len(l.text)), 8)
	}
	const nDyn = 10
	dynsymOff := dynamicOff + nDyn*dynSize
	dynstrOff := dynsymOff + uint64(len(dsyms))*symSize
	relOff := alignUp(dynstrOff+uint64(len(dynstr)), 8)
	relLen := uint64(len(sites)) * relSize
	shstrOff := relOff + relLen

	secNames := []string{"", ".text"}
	if hasRo {
		secNames = append(secNames, ".rodata")
	}
	secNames = append(secNames, ".dynamic", ".dynsym", ".dynstr", ".rel.dyn", ".shstrtab")
	shstr := []byte{0}
	nameOff := map[string]uint32{"": 0}
	for _, n := range secNames[1:] {
		nameOff[n] = uint32(len(shstr))
		shstr = append(append(shstr, n...), 0)
	}
	shOff := alignUp(shstrOff+uint64(len(shstr)), 8)
	idx := func(name string) uint32 {
		for i, n := range secNames {
			if n == name {
				return uint32(i)
			}
		}
		panic("sbpf: unknown output section " + name)
	}

	out := make([]byte, shOff+uint64(len(secNames))*shdrSize)
	le := binary.LittleEndian

	// ELF header.
	copy(out, []byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT), byte(elf.ELFOSABI_NONE)})
	le.PutUint16(out[16:], uint16(elf.ET_DYN))
	le.PutUint16(out[18:], uint16(elf.EM_BPF))
	le.PutUint32(out[20:], uint32(elf.EV_CURRENT))
	le.PutUint64(out[24:], entry)
	le.PutUint64(out[32:], ehdrSize)
	le.PutUint64(out[40:], shOff)
	le.PutUint32(out[48:], 0) // e_flags 0: SBPF v0
	le.PutUint16(out[52:], ehdrSize)
	le.PutUint16(out[54:], phdrSize)
	le.PutUint16(out[56:], uint16(l.phdrCount()))
	le.PutUint16(out[58:], shdrSize)
	le.PutUint16(out[60:], uint16(len(secNames)))
	le.PutUint16(out[62:], uint16(idx(".shstrtab")))

	// Program headers.
	ph := out[ehdrSize:]
	putPhdr := func(typ elf.ProgType, flags elf.ProgFlag, off, size, align uint64) {
		le.PutUint32(ph[0:], uint32(typ))
		le.PutUint32(ph[4:], uint32(flags))
		le.PutUint64(ph[8:], off)
		le.PutUint64(ph[16:], off)
		le.PutUint64(ph[24:], off)
		le.PutUint64(ph[32:], size)
		le.PutUint64(ph[40:], size)
		le.PutUint64(ph[48:], align)
		ph = ph[phdrSize:]
	}
	putPhdr(elf.PT_LOAD, elf.PF_R|elf.PF_X, l.textOff, uint64(len(l.text)), segmentAlig)
	if hasRo {
		putPhdr(elf.PT_LOAD, elf.PF_R, l.roOff, uint64(len(l.rodata)), segmentAlig)
	}
	putPhdr(elf.PT_LOAD, elf.PF_R, dynamicOff, relOff+relLen-dynamicOff, segmentAlig)
	putPhdr(elf.PT_DYNAMIC, elf.PF_R, dynamicOff, nDyn*dynSize, 8)

	copy(out[l.textOff:], l.text)
	copy(out[l.roOff:], l.rodata)

	// .dynamic: without syscalls there is no relocation table to point at.
	dyn := out[dynamicOff:]
	putDyn := func(tag elf.DynTag, val uint64) {
		le.PutUint64(dyn[0:], uint64(tag))
		le.PutUint64(dyn[8:], val)
		dyn = dyn[dynSize:]
	}
	if len(sites) > 0 {
		putDyn(elf.DT_REL, relOff)
		putDyn(elf.DT_RELSZ, relLen)
		putDyn(elf.DT_RELENT, relSize)
		putDyn(elf.DT_TEXTREL, 0)
	}
	putDyn(elf.DT_SYMTAB, dynsymOff)
	putDyn(elf.DT_SYMENT, symSize)
	putDyn(elf.DT_STRTAB, dynstrOff)
	putDyn(elf.DT_STRSZ, uint64(len(dynstr)))
	// The rest stays zero: DT_NULL entries.

	ds := out[dynsymOff:]
	for _, s := range dsyms {
		le.PutUint32(ds[0:], s.name)
		ds[4] = s.info
		le.PutUint16(ds[6:], s.shndx)
		le.PutUint64(ds[8:], s.value)
		le.PutUint64(ds[16:], s.size)
		ds = ds[symSize:]
	}
	copy(out[dynstrOff:], dynstr)
	rel := out[relOff:]
	for _, at := range sites {
		le.PutUint64(rel[0:], l.textOff+at)
		le.PutUint64(rel[8:], uint64(symIndex[l.syscallSites[at]])<<32|rBPF64_32)
		rel = rel[relSize:]
	}
	copy(out[shstrOff:], shstr)

	// Section headers; allocated sections have sh_addr == sh_offset.
	sh := out[shOff+shdrSize:]
	putShdr := func(name string, typ elf.SectionType, flags elf.SectionFlag, off, size uint64, link, info uint32, align, entsize uint64) {
		le.PutUint32(sh[0:], nameOff[name])
		le.PutUint32(sh[4:], uint32(typ))
		le.PutUint64(sh[8:], uint64(flags))
		if flags&elf.SHF_ALLOC != 0 {
			le.PutUint64(sh[16:], off)
		}
		le.PutUint64(sh[24:], off)
		le.PutUint64(sh[32:], size)
		le.PutUint32(sh[40:], link)
		le.PutUint32(sh[44:], info)
		le.PutUint64(sh[48:], align)
		le.PutUint64(sh[56:], entsize)
		sh = sh[shdrSize:]
	}
	putShdr(".text", elf.SHT_PROGBITS, elf.SHF_ALLOC|elf.SHF_EXECINSTR, l.textOff, uint64(len(l.text)), 0, 0, insnSize, 0)
	if hasRo {
		putShdr(".rodata", elf.SHT_PROGBITS, elf.SHF_ALLOC, l.roOff, uint64(len(l.rodata)), 0, 0, 8, 0)
	}
	putShdr(".dynamic", elf.SHT_DYNAMIC, elf.SHF_ALLOC, dynamicOff, nDyn*dynSize, idx(".dynstr"), 0, 8, dynSize)
	putShdr(".dynsym", elf.SHT_DYNSYM, elf.SHF_ALLOC, dynsymOff, uint64(len(dsyms))*symSize, idx(".dynstr"), 1, 8, symSize)
	putShdr(".dynstr", elf.SHT_STRTAB, elf.SHF_ALLOC, dynstrOff, uint64(len(dynstr)), 0, 0, 1, 0)
	putShdr(".rel.dyn", elf.SHT_REL, elf.SHF_ALLOC, relOff, relLen, idx(".dynsym"), 0, 8, relSize)
	putShdr(".shstrtab", elf.SHT_STRTAB, 0, shstrOff, uint64(len(shstr)), 0, 0, 1, 0)
	return out, names
}

func alignUp(v, a uint64) uint64 { return (v + a - 1) &^ (a - 1) }

func padTo(b []byte, align uint64) []byte {
	for uint64(len(b))%align != 0 {
		b = append(b, 0)
	}
	return b
}
