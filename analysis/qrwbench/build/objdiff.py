"""Machine-code identity of a build: the idea of the kernel's scripts/objdiff.

A commit that changes no executable byte of the kernel or of the module it
loads cannot change what a cell measures, whatever its boots say: the bisect
oracle gives such a step the verdict of the commit whose code it shares,
without booting it (a comment, a documentation line, a change under an
unset CONFIG option).

``digest(path)`` hashes every allocated executable section of an ELF file
(name, address and bytes); for a relocatable object (the module ``.ko``,
whose calls are still relocations) also each of those sections' relocations
with the symbol (or section) they name. Two builds with the same digest for
vmlinux and qrwbench.ko run the same instructions at the same addresses.
Data-only changes (version strings, the bug table's line numbers) are not
code; a change that moves data the code addresses changes the code.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from .elfmini import Elf

SHF_ALLOC, SHF_EXECINSTR = 0x2, 0x4
SHT_PROGBITS = 1
ET_REL = 1
STT_SECTION = 3


def executable_sections(elf: Elf):
    return [s for s in elf.sections if s.type == SHT_PROGBITS
            and s.flags & SHF_ALLOC and s.flags & SHF_EXECINSTR]


def digest(path) -> str:
    """sha256 of the executable sections of ELF file ``path`` (hex)."""
    try:
        elf = Elf(path)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: cannot read its code: {e}") from None
    h = hashlib.sha256()
    syms = elf.symbols if elf.type == ET_REL else []
    for s in executable_sections(elf):
        h.update(f"{s.name}\0{s.addr:x}\0{s.size:x}\0".encode())
        h.update(elf.section_bytes(s))
        for off, idx, typ, addend in elf.relas(s.name):
            sym = syms[idx] if idx < len(syms) else None
            name = ("?" if sym is None else
                    elf.sections[sym.shndx].name if sym.type == STT_SECTION
                    and sym.shndx < len(elf.sections) else sym.name)
            h.update(f"{off:x} {name} {typ} {addend:x}\n".encode())
    return h.hexdigest()


def build_digest(files) -> str:
    """One digest over several ELF files (vmlinux, then the module)."""
    h = hashlib.sha256()
    for f in files:
        h.update(f"{Path(f).name}\0{digest(f)}\n".encode())
    return h.hexdigest()
