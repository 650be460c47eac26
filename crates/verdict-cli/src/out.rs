//! Standard output for every command. `print!` panics when the reader has gone away
//! (`verdict history EX --json | head`); here every write returns an error instead, which the
//! command passes up, so a closed standard output ends the command with exit status 2 and one
//! line on standard error. The crate denies `clippy::print_stdout`, so no command can bypass
//! this.

use std::fmt;
use std::io::{self, Write};

/// Writes formatted text to standard output and flushes it.
pub fn write_fmt(args: fmt::Arguments<'_>) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    out.write_fmt(args)
        .and_then(|()| out.flush())
        .map_err(failed)
}

/// Writes bytes to standard output and flushes them.
pub fn write_all(bytes: &[u8]) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(failed)
}

fn failed(e: io::Error) -> anyhow::Error {
    if e.kind() == io::ErrorKind::BrokenPipe {
        anyhow::anyhow!("standard output was closed before everything was written")
    } else {
        anyhow::anyhow!("cannot write to standard output: {e}")
    }
}

/// `println!` that returns an error instead of panicking.
macro_rules! outln {
    () => {
        $crate::out::write_fmt(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::write_fmt(format_args!("{}\n", format_args!($($arg)*)))
    };
}
