// Command resident says which parts of a running Go program's executable
// are in its resident set: for each page of the executable mapped into the
// process and present (/proc/PID/pagemap), the functions of .text on it by
// package, and the other sections by name. It answers docs/performance.md's
// question of what the executable's file-backed RSS is made of.
//
//	resident -pid PID -bin BINARY
//
// BINARY is the program's executable with its symbol table (a build without
// -s): the same build as the one running, or one of the same source and
// flags but -s -w, whose sections lie at the same addresses (resident checks
// .text's). Needs to read /proc/PID/pagemap (the present bit needs no
// privilege).
package main

import (
	"bufio"
	"cmp"
	"debug/elf"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

const page = 4096

func main() {
	pid := flag.Int("pid", 0, "the process")
	bin := flag.String("bin", "", "its executable, with symbols")
	flag.Parse()
	if *pid == 0 || *bin == "" {
		fmt.Fprintln(os.Stderr, "usage: resident -pid PID -bin BINARY")
		os.Exit(2)
	}
	if err := run(*pid, *bin); err != nil {
		fmt.Fprintln(os.Stderr, "resident:", err)
		os.Exit(1)
	}
}

type span struct {
	lo, hi uint64 // virtual addresses
	name   string
}

func run(pid int, bin string) error {
	f, err := elf.Open(bin)
	if err != nil {
		return err
	}
	defer f.Close()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return err
	}
	running, err := elf.Open(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return err
	}
	defer running.Close()
	if a, b := f.Section(".text"), running.Section(".text"); a == nil || b == nil || a.Addr != b.Addr || a.Size != b.Size {
		return fmt.Errorf("%s's .text is not where the running %s's is", bin, exe)
	}
	var sections []span
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && s.Size > 0 {
			sections = append(sections, span{s.Addr, s.Addr + s.Size, s.Name})
		}
	}
	syms, err := f.Symbols()
	if err != nil {
		return err
	}
	text := f.Section(".text")
	var funcs []span
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Size > 0 && s.Value >= text.Addr && s.Value < text.Addr+text.Size {
			funcs = append(funcs, span{s.Value, s.Value + s.Size, pkgOf(s.Name)})
		}
	}
	slices.SortFunc(funcs, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })

	present, mapped, err := residentPages(pid, exe)
	if err != nil {
		return err
	}
	bySection := map[string]uint64{}
	byPkg := map[string]float64{}
	var total uint64
	for _, va := range present {
		total += page
		for _, s := range sections {
			if o := overlap(va, va+page, s.lo, s.hi); o > 0 {
				bySection[s.name] += o
			}
		}
		if va+page <= text.Addr || va >= text.Addr+text.Size {
			continue
		}
		// The functions on this page, each counted for the bytes of the
		// page it takes.
		i, _ := slices.BinarySearchFunc(funcs, va, func(s span, v uint64) int { return cmp.Compare(s.hi, v+1) })
		for ; i < len(funcs) && funcs[i].lo < va+page; i++ {
			if o := overlap(va, va+page, funcs[i].lo, funcs[i].hi); o > 0 {
				byPkg[funcs[i].name] += float64(o)
			}
		}
	}
	fmt.Printf("executable %s: %d KiB mapped, %d KiB resident\n\n", exe, mapped/1024, total/1024)
	fmt.Println("| section | resident KiB |\n|---|---:|")
	for _, k := range sortedKeys(bySection, func(v uint64) float64 { return float64(v) }) {
		fmt.Printf("| %s | %d |\n", k, bySection[k]/1024)
	}
	fmt.Println("\n| package (.text, functions' bytes on resident pages) | KiB |\n|---|---:|")
	for _, k := range sortedKeys(byPkg, func(v float64) float64 { return v }) {
		if byPkg[k] >= 8*1024 {
			fmt.Printf("| %s | %.0f |\n", k, byPkg[k]/1024)
		}
	}
	return nil
}

// residentPages returns the start of every present page of the process's
// mappings of exe, and the bytes mapped.
func residentPages(pid int, exe string) ([]uint64, uint64, error) {
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, 0, err
	}
	defer maps.Close()
	pm, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return nil, 0, err
	}
	defer pm.Close()
	var present []uint64
	var mapped uint64
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != exe {
			continue
		}
		lo, hi, _ := strings.Cut(fields[0], "-")
		a, err1 := strconv.ParseUint(lo, 16, 64)
		b, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			return nil, 0, fmt.Errorf("maps line %q", sc.Text())
		}
		mapped += b - a
		buf := make([]byte, (b-a)/page*8)
		if _, err := pm.ReadAt(buf, int64(a/page*8)); err != nil {
			return nil, 0, fmt.Errorf("pagemap: %w", err)
		}
		for i := 0; i < len(buf); i += 8 {
			if binary.LittleEndian.Uint64(buf[i:])&(1<<63) != 0 {
				present = append(present, a+uint64(i/8)*page)
			}
		}
	}
	return present, mapped, sc.Err()
}

func overlap(a, b, c, d uint64) uint64 {
	lo, hi := max(a, c), min(b, d)
	if hi <= lo {
		return 0
	}
	return hi - lo
}

// pkgOf is the package path of a Go symbol name: up to the first dot after
// the last slash (type.* and go:* symbols as they are).
func pkgOf(name string) string {
	name, _, _ = strings.Cut(name, "[")
	slash := strings.LastIndex(name, "/")
	dot := strings.Index(name[slash+1:], ".")
	if dot < 0 {
		return name
	}
	return name[:slash+1+dot]
}

func sortedKeys[V any](m map[string]V, f func(V) float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(f(m[b]), f(m[a])) })
	return keys
}
