"""A minimal ELF64 reader: sections, symbols, RELA entries.

Just what the ordering audit needs (symbol addresses and sizes for the
alignment check and function extents; the ``.altinstructions`` entries of
arm64 builds). Either byte order: the per-arch audit reads sparc64's
big-endian objects too. No third-party ELF library is available to Debian's
interpreter here, and this is small.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Section:
    index: int
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    align: int
    entsize: int


@dataclass
class Symbol:
    name: str
    value: int
    size: int
    type: int        # STT_*: 2 = FUNC, 3 = SECTION
    bind: int
    shndx: int


class Elf:
    def __init__(self, path):
        self.path = Path(path)
        self.data = self.path.read_bytes()
        d = self.data
        if d[:4] != b"\x7fELF" or d[4] != 2 or d[5] not in (1, 2):
            raise ValueError(f"{path}: not an ELF64 file")
        self.endian = "<" if d[5] == 1 else ">"
        e = self.endian
        (self.type, self.machine, _v, _entry, _phoff, shoff, _flags, _ehsize, _phentsize,
         _phnum, shentsize, shnum, shstrndx) = struct.unpack_from(e + "HHIQQQIHHHHHH", d, 16)
        raw = [struct.unpack_from(e + "IIQQQQIIQQ", d, shoff + i * shentsize) for i in range(shnum)]
        strtab = raw[shstrndx]
        self.sections = []
        for i, r in enumerate(raw):
            self.sections.append(Section(i, self._str(strtab[4], r[0]), r[1], r[2], r[3], r[4],
                                         r[5], r[6], r[7], r[8], r[9]))
        self._symbols = None

    def _str(self, off, idx) -> str:
        end = self.data.index(b"\0", off + idx)
        return self.data[off + idx:end].decode("ascii", "replace")

    def section(self, name) -> Section | None:
        for s in self.sections:
            if s.name == name:
                return s
        return None

    def section_bytes(self, s: Section) -> bytes:
        return self.data[s.offset:s.offset + s.size]

    @property
    def symbols(self) -> list[Symbol]:
        if self._symbols is None:
            self._symbols = []
            st = next((s for s in self.sections if s.type == 2), None)   # SHT_SYMTAB
            if st is not None:
                stroff = self.sections[st.link].offset
                for i in range(st.size // 24):
                    name, info, _other, shndx, value, size = struct.unpack_from(
                        self.endian + "IBBHQQ", self.data, st.offset + i * 24)
                    self._symbols.append(Symbol(self._str(stroff, name), value, size,
                                                info & 0xF, info >> 4, shndx))
        return self._symbols

    def functions(self, section: str | None = None) -> dict[str, Symbol]:
        """{name: symbol} of the FUNC symbols (of one section, when named)."""
        idx = self.section(section).index if section and self.section(section) else None
        return {s.name: s for s in self.symbols
                if s.type == 2 and (idx is None or s.shndx == idx)}

    def relas(self, target: str) -> list[tuple[int, int, int, int]]:
        """(offset, symbol index, type, addend) of the RELA section for ``target``."""
        s = self.section(".rela" + target)
        if s is None:
            return []
        out = []
        for i in range(s.size // 24):
            off, info, addend = struct.unpack_from(self.endian + "QQq", self.data, s.offset + i * 24)
            out.append((off, info >> 32, info & 0xFFFFFFFF, addend))
        return out


@dataclass
class AltInstr:
    orig: int        # address (vmlinux) or .text offset (module) of the patched code
    alt: int | None  # of the replacement (None for a callback entry)
    cpucap: int      # without the callback bit
    callback: bool
    orig_len: int
    alt_len: int


ARM64_CB_BIT = 0x8000


def arm64_altinstructions(elf: Elf, section: str = ".text") -> list[AltInstr]:
    """The arm64 ``struct alt_instr`` entries (s32 orig, s32 alt, u16 cap, u8, u8).

    In a linked vmlinux the offsets are resolved; in a relocatable module they
    are PREL32 relocations against ``section`` (offsets in it are returned;
    entries of other sections are left out) or against the callback symbol."""
    s = elf.section(".altinstructions")
    if s is None:
        return []
    raw = elf.section_bytes(s)
    n = len(raw) // 12
    relas = {off: (sym, addend) for off, sym, _t, addend in elf.relas(".altinstructions")}
    syms = elf.symbols
    text = elf.section(section)
    out = []
    for i in range(n):
        o, a, cap, olen, alen = struct.unpack_from("<iiHBB", raw, i * 12)
        cb = bool(cap & ARM64_CB_BIT)
        if relas:
            def target(field_off):
                r = relas.get(i * 12 + field_off)
                if r is None:
                    return None
                sym = syms[r[0]]
                if text is None or sym.shndx != text.index:
                    return None
                return sym.value + r[1]
            orig, alt = target(0), (None if cb else target(4))
            if orig is None:
                continue
        else:
            orig = s.addr + i * 12 + o
            alt = None if cb else s.addr + i * 12 + 4 + a
        out.append(AltInstr(orig, alt, cap & ~ARM64_CB_BIT, cb, olen, alen))
    return out
