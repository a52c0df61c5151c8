//! The kernel names of a CUDA ELF image (a cubin), read from its symbol table, so that a build
//! can be checked without a GPU.

/// `st_other` flag of a kernel entry in a CUDA ELF (`STO_CUDA_ENTRY`).
const STO_CUDA_ENTRY: u8 = 0x10;
const SHT_SYMTAB: u32 = 2;
const STT_FUNC: u8 = 2;

/// The `N` bytes at `base + off`, or `None` past the end (or on overflow: the offsets come
/// from the file).
fn bytes<const N: usize>(b: &[u8], base: usize, off: usize) -> Option<[u8; N]> {
    let at = base.checked_add(off)?;
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}
fn u16_at(b: &[u8], base: usize, off: usize) -> Option<u16> {
    bytes(b, base, off).map(u16::from_le_bytes)
}
fn u32_at(b: &[u8], base: usize, off: usize) -> Option<u32> {
    bytes(b, base, off).map(u32::from_le_bytes)
}
fn u64_at(b: &[u8], base: usize, off: usize) -> Option<usize> {
    usize::try_from(u64::from_le_bytes(bytes(b, base, off)?)).ok()
}

/// The entry functions (kernels) of a 64-bit little-endian ELF image; empty for anything else.
pub(crate) fn entry_names(elf: &[u8]) -> Vec<String> {
    parse(elf).unwrap_or_default()
}

fn parse(b: &[u8]) -> Option<Vec<String>> {
    // ELF64, little-endian.
    if b.get(..4)? != b"\x7fELF" || *b.get(4)? != 2 || *b.get(5)? != 1 {
        return None;
    }
    let shoff = u64_at(b, 0, 0x28)?;
    let shentsize = u16_at(b, 0, 0x3a)? as usize;
    let shnum = u16_at(b, 0, 0x3c)? as usize;
    let section = |i: usize| shoff.checked_add(i.checked_mul(shentsize)?);
    let mut names = Vec::new();
    for i in 0..shnum {
        let sh = section(i)?;
        if u32_at(b, sh, 4)? != SHT_SYMTAB {
            continue;
        }
        let (off, size) = (u64_at(b, sh, 0x18)?, u64_at(b, sh, 0x20)?);
        let entsize = u64_at(b, sh, 0x38)?.max(24);
        // The string table of the symbols is the section named by sh_link.
        let strtab = section(u32_at(b, sh, 0x28)? as usize)?;
        let str_off = u64_at(b, strtab, 0x18)?;
        for s in (off..off.checked_add(size)?).step_by(entsize) {
            let [info, other] = bytes::<2>(b, s, 4)?;
            if info & 0xf != STT_FUNC || other & STO_CUDA_ENTRY == 0 {
                continue;
            }
            let start = str_off.checked_add(u32_at(b, s, 0)? as usize)?;
            let len = b.get(start..)?.iter().position(|&c| c == 0)?;
            names.push(String::from_utf8_lossy(&b[start..start + len]).into_owned());
        }
    }
    names.sort();
    names.dedup();
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anything_but_an_elf_has_no_entries() {
        assert!(entry_names(b"").is_empty());
        assert!(entry_names(b"\x7fELF").is_empty());
        assert!(entry_names(&[0u8; 128]).is_empty());
        let mut truncated = b"\x7fELF\x02\x01".to_vec();
        truncated.resize(0x40, 0xff);
        assert!(entry_names(&truncated).is_empty());
    }
}
