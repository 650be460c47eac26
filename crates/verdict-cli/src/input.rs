//! Reading a command's input: a file, or standard input for `-`, with a size cap so a hostile
//! input cannot exhaust memory.

use anyhow::{Context, Result, bail};
use std::io::Read;
use std::path::Path;

/// The largest document a command reads (64 MiB).
pub const MAX_INPUT: u64 = 64 * 1024 * 1024;

/// Reads `path` (or stdin for `-`) whole, refusing more than [`MAX_INPUT`] bytes.
pub fn read_all(path: &str) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    let reader: Box<dyn Read> = if path == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(
            std::fs::File::open(Path::new(path)).with_context(|| format!("cannot open {path}"))?,
        )
    };
    reader
        .take(MAX_INPUT + 1)
        .read_to_end(&mut buf)
        .with_context(|| format!("cannot read {path}"))?;
    if buf.len() as u64 > MAX_INPUT {
        bail!("{path} is larger than {MAX_INPUT} bytes");
    }
    Ok(buf)
}
