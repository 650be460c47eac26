//! Opening the files probes read (a `file` probe's content, a `json` file source, a log).
//!
//! The path is named by the spec, but what is at it belongs to the system under test, which
//! may have put something else there:
//! - a FIFO or a device, whose `open` or `read` would block forever (and keep the runtime from
//!   shutting down): the file is opened without blocking and anything but a regular file is
//!   refused, naming what it is;
//! - a symlink out of its directory to a file of the runner's (a token, a key): its bytes
//!   would land in the report's excerpt. The probe still reads it (the spec reads properties
//!   through symlinks), but no excerpt of it is kept;
//! - a hard link to such a file, which no path walk can tell from the file it names: a file
//!   with more than one link is read and judged the same way, without an excerpt.

use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

/// A regular file opened for reading.
#[derive(Debug)]
pub(crate) struct Opened {
    /// The file.
    pub(crate) file: tokio::fs::File,
    /// Why no excerpt of it may be kept, if so.
    pub(crate) withheld: Option<String>,
}

/// Opens `path` for reading if it is a regular file.
pub(crate) async fn open_regular(path: &str) -> Result<Opened, String> {
    let owned = path.to_owned();
    tokio::task::spawn_blocking(move || open_blocking(&owned))
        .await
        .map_err(|e| format!("cannot open {path:?}: {e}"))?
}

fn open_blocking(path: &str) -> Result<Opened, String> {
    // Non-blocking: opening a FIFO for reading waits for a writer otherwise. No controlling
    // terminal: opening a terminal device must not make it this process's.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| format!("cannot open {path:?}: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot inspect {path:?}: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "{path:?} is {}, not a regular file",
            what_it_is(&meta)
        ));
    }
    let withheld = match meta.nlink() {
        0 | 1 => leaves_its_directory(Path::new(path), &meta),
        n => Some(format!(
            "{path:?} has {n} hard links; another of them may be a file outside its directory"
        )),
    };
    Ok(Opened {
        file: tokio::fs::File::from_std(file),
        withheld,
    })
}

/// What a file that is not a regular file is, for the refusal.
pub(crate) fn what_it_is(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_symlink() {
        "a symlink"
    } else {
        "not a regular file"
    }
}

/// Why the file opened at `path` must not be shown: the path goes through a symlink whose
/// target lies outside the directory that holds the link, or the path no longer leads to the
/// file opened (it changed meanwhile). `None` when neither is so.
fn leaves_its_directory(path: &Path, opened: &std::fs::Metadata) -> Option<String> {
    let shown = path.display();
    let mut at = if path.is_absolute() {
        PathBuf::from("/")
    } else {
        match std::env::current_dir().and_then(std::fs::canonicalize) {
            Ok(d) => d,
            Err(e) => return Some(format!("cannot tell where {shown} leads: {e}")),
        }
    };
    // `at` is always a path without symlinks, so `..` is taken lexically.
    for part in path.components() {
        match part {
            Component::RootDir => at = PathBuf::from("/"),
            Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                at.pop();
            }
            Component::Normal(name) => {
                let next = at.join(name);
                let link = match std::fs::symlink_metadata(&next) {
                    Ok(m) => m.file_type().is_symlink(),
                    Err(e) => return Some(format!("cannot tell where {shown} leads: {e}")),
                };
                if !link {
                    at = next;
                    continue;
                }
                let target = match std::fs::canonicalize(&next) {
                    Ok(t) => t,
                    Err(e) => return Some(format!("cannot tell where {shown} leads: {e}")),
                };
                if !target.starts_with(&at) {
                    return Some(format!(
                        "{} is a symlink to {}, outside {}",
                        next.display(),
                        target.display(),
                        at.display()
                    ));
                }
                at = target;
            }
        }
    }
    match std::fs::metadata(&at) {
        Ok(m) if m.dev() == opened.dev() && m.ino() == opened.ino() => None,
        _ => Some(format!("{shown} changed while it was read")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn withheld(path: &Path) -> Option<String> {
        let meta = std::fs::metadata(path).unwrap();
        leaves_its_directory(path, &meta)
    }

    #[test]
    fn links_within_their_directory_are_shown_and_links_out_of_it_are_not() {
        let root = tempfile::tempdir().unwrap();
        let inside = root.path().join("work");
        std::fs::create_dir_all(inside.join("sub")).unwrap();
        std::fs::write(inside.join("sub/real"), "x").unwrap();
        std::fs::write(root.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink("sub/real", inside.join("near")).unwrap();
        std::os::unix::fs::symlink("../secret", inside.join("far")).unwrap();
        std::os::unix::fs::symlink(root.path(), inside.join("up")).unwrap();
        assert_eq!(withheld(&inside.join("sub/real")), None);
        assert_eq!(withheld(&inside.join("near")), None);
        assert!(withheld(&inside.join("far")).is_some());
        // A directory link out of its directory counts as much as a link to the file.
        assert!(withheld(&inside.join("up/secret")).is_some());
        // A path naming another file than the one opened is not shown either.
        let other = std::fs::metadata(inside.join("sub/real")).unwrap();
        assert!(leaves_its_directory(&root.path().join("secret"), &other).is_some());
    }

    #[test]
    fn a_file_with_another_hard_link_is_withheld() {
        let root = tempfile::tempdir().unwrap();
        let secret = root.path().join("token");
        std::fs::write(&secret, "s").unwrap();
        std::fs::create_dir(root.path().join("work")).unwrap();
        let report = root.path().join("work/report.txt");
        std::fs::hard_link(&secret, &report).unwrap();
        let opened = open_blocking(&report.display().to_string()).unwrap();
        let why = opened.withheld.unwrap();
        assert!(why.contains("2 hard links"), "{why}");
        std::fs::remove_file(&secret).unwrap();
        assert_eq!(
            open_blocking(&report.display().to_string())
                .unwrap()
                .withheld,
            None
        );
    }
}
