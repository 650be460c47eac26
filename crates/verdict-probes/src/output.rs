//! Bounded reading of probe output: keep at most a cap, hash everything.
//!
//! A probe's output is read to its end (within the probe's timeout) so its digest is the digest
//! of the whole output; only the first `cap` bytes are kept for evaluation, and only a short
//! excerpt of them is kept in results. Output beyond the cap makes the observation an error:
//! an expectation judged on part of the output would be a guess.

use tokio::io::{AsyncRead, AsyncReadExt};
use verdict_core::digest::{Digest, RawHasher};

/// Default cap on the output a probe keeps (8 MiB).
pub const DEFAULT_MAX_OUTPUT: u64 = 8 * 1024 * 1024;

/// Bytes of output kept in a result's excerpt.
pub const EXCERPT_BYTES: usize = 1024;

/// Output read with a cap.
#[derive(Debug, Clone)]
pub struct Captured {
    /// The first `cap` bytes.
    pub bytes: Vec<u8>,
    /// How many bytes there were in all.
    pub total: u64,
    /// SHA-256 of all of them.
    pub digest: Digest,
    /// Whether there were more than `cap`.
    pub overflow: bool,
}

impl Captured {
    /// Captures bytes already in memory.
    #[must_use]
    pub fn from_bytes(all: &[u8], cap: u64) -> Self {
        let keep = usize::try_from(cap).unwrap_or(usize::MAX).min(all.len());
        Self {
            bytes: all.get(..keep).unwrap_or_default().to_vec(),
            total: all.len() as u64,
            digest: verdict_core::digest::raw(all),
            overflow: all.len() > keep,
        }
    }

    /// The kept bytes as text (invalid UTF-8 replaced), for showing and snapshots only: a text
    /// expectation reads [`Captured::strict_text`].
    #[must_use]
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }

    /// The kept bytes as text for a text expectation, or why they are not text.
    pub fn strict_text(&self) -> Result<&str, NotText> {
        strict_text(&self.bytes)
    }

    /// A bounded excerpt of the kept bytes and whether it was cut.
    #[must_use]
    pub fn excerpt(&self) -> (String, bool) {
        excerpt(&self.bytes, self.overflow)
    }
}

/// Why bytes are not text a text expectation can judge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotText {
    /// Starts with a UTF-16 or UTF-32 byte-order mark.
    #[error("is not UTF-8 text: it starts with a {0} byte-order mark")]
    ForeignBom(&'static str),
    /// Not valid UTF-8.
    #[error("is not UTF-8 text ({0})")]
    NotUtf8(std::str::Utf8Error),
    /// Valid UTF-8 holding NUL bytes.
    #[error("holds NUL bytes: UTF-16?")]
    Nul,
}

/// `bytes` as text for a text expectation, never with bytes replaced or skipped.
///
/// UTF-16 of ASCII is valid UTF-8 with a NUL after every letter, so `error` written in UTF-16
/// holds no `error` as UTF-8 and a `not_matches` would pass on it; replacing bad bytes hides
/// the same. Either makes the text unjudgeable.
pub fn strict_text(bytes: &[u8]) -> Result<&str, NotText> {
    // UTF-32LE's mark starts with UTF-16LE's, so it is looked for first.
    const BOMS: [(&[u8], &str); 4] = [
        (&[0xFF, 0xFE, 0, 0], "UTF-32LE"),
        (&[0, 0, 0xFE, 0xFF], "UTF-32BE"),
        (&[0xFF, 0xFE], "UTF-16LE"),
        (&[0xFE, 0xFF], "UTF-16BE"),
    ];
    if let Some((_, name)) = BOMS.iter().find(|(bom, _)| bytes.starts_with(bom)) {
        return Err(NotText::ForeignBom(name));
    }
    let text = std::str::from_utf8(bytes).map_err(NotText::NotUtf8)?;
    if text.contains('\0') {
        return Err(NotText::Nul);
    }
    Ok(text)
}

/// The first [`EXCERPT_BYTES`] of `bytes` as text, cut on a character boundary.
#[must_use]
pub fn excerpt(bytes: &[u8], already_cut: bool) -> (String, bool) {
    if bytes.len() <= EXCERPT_BYTES {
        return (String::from_utf8_lossy(bytes).into_owned(), already_cut);
    }
    let head = bytes.get(..EXCERPT_BYTES).unwrap_or(bytes);
    let text = String::from_utf8_lossy(head);
    // A multi-byte character split at the cut shows as U+FFFD at the very end; drop it.
    let text = text.strip_suffix('\u{fffd}').unwrap_or(&text).to_owned();
    (text, true)
}

/// Reads `reader` to its end, keeping at most `cap` bytes and hashing all of them.
pub async fn read_capped<R: AsyncRead + Unpin>(
    mut reader: R,
    cap: u64,
) -> std::io::Result<Captured> {
    let cap_usize = usize::try_from(cap).unwrap_or(usize::MAX);
    let mut bytes = Vec::new();
    let mut hasher = RawHasher::new();
    let mut total: u64 = 0;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = reader.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        let chunk = buf.get(..n).unwrap_or_default();
        hasher.update(chunk);
        total += n as u64;
        let room = cap_usize.saturating_sub(bytes.len());
        bytes.extend_from_slice(chunk.get(..room.min(n)).unwrap_or_default());
    }
    Ok(Captured {
        overflow: total > cap,
        bytes,
        total,
        digest: hasher.finish(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keeps_the_cap_and_hashes_everything() {
        let data = vec![b'x'; 100_000];
        let c = read_capped(&data[..], 10).await.unwrap();
        assert_eq!(c.bytes.len(), 10);
        assert_eq!(c.total, 100_000);
        assert!(c.overflow);
        assert_eq!(c.digest, verdict_core::digest::raw(&data));
        let small = read_capped(&b"ok"[..], 10).await.unwrap();
        assert!(!small.overflow);
        assert_eq!(small.text(), "ok");
    }

    #[test]
    fn text_for_expectations_is_utf8_without_nul_or_foreign_marks() {
        assert_eq!(strict_text(b"ok \xc3\xa9"), Ok("ok \u{e9}"));
        let utf16le: Vec<u8> = "error".encode_utf16().flat_map(u16::to_le_bytes).collect();
        assert_eq!(strict_text(&utf16le), Err(NotText::Nul));
        assert!(matches!(strict_text(b"a\xffb"), Err(NotText::NotUtf8(_))));
        assert_eq!(
            strict_text(b"\xff\xfee\0"),
            Err(NotText::ForeignBom("UTF-16LE"))
        );
        assert_eq!(
            strict_text(b"\xff\xfe\0\0e\0\0\0"),
            Err(NotText::ForeignBom("UTF-32LE"))
        );
        assert_eq!(
            strict_text(b"\0\0\xfe\xff"),
            Err(NotText::ForeignBom("UTF-32BE"))
        );
        assert_eq!(NotText::Nul.to_string(), "holds NUL bytes: UTF-16?");
    }

    #[test]
    fn excerpts_are_bounded_and_cut_on_characters() {
        let text = "é".repeat(EXCERPT_BYTES);
        let (e, cut) = excerpt(text.as_bytes(), false);
        assert!(cut);
        assert!(e.len() <= EXCERPT_BYTES);
        assert!(!e.contains('\u{fffd}'));
    }
}
