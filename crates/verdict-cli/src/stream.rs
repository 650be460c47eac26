//! Streaming raw SHA-256 of a reader, with reading and hashing overlapped: a reader thread fills
//! buffers while this thread hashes the previous one, so on a machine with two cores the
//! throughput is that of SHA-256 alone, not SHA-256 plus the copy out of the page cache.

use std::io::{self, Read};
use std::sync::mpsc;
use verdict_core::digest::{Digest, RawHasher};

/// Size of each read.
pub const CHUNK: usize = 4 << 20;

/// `sha256:<hex>` of everything `reader` yields.
pub fn sha256<R: Read + Send + 'static>(mut reader: R) -> io::Result<Digest> {
    let (full_tx, full_rx) = mpsc::sync_channel::<io::Result<Vec<u8>>>(2);
    let (empty_tx, empty_rx) = mpsc::channel::<Vec<u8>>();
    for _ in 0..3 {
        // Three buffers: one being read into, one queued, one being hashed.
        let _ = empty_tx.send(vec![0u8; CHUNK]);
    }
    let reader_thread = std::thread::spawn(move || {
        while let Ok(mut buf) = empty_rx.recv() {
            buf.resize(CHUNK, 0);
            let mut filled = 0;
            let result = loop {
                match reader.read(buf.get_mut(filled..).unwrap_or_default()) {
                    Ok(0) => break Ok(()),
                    Ok(n) => {
                        filled += n;
                        if filled == CHUNK {
                            break Ok(());
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => break Err(e),
                }
            };
            buf.truncate(filled);
            let done = filled == 0;
            let msg = result.map(|()| buf);
            let failed = msg.is_err();
            if full_tx.send(msg).is_err() || done || failed {
                return;
            }
        }
    });
    let mut h = RawHasher::new();
    let outcome = loop {
        match full_rx.recv() {
            Ok(Ok(buf)) if buf.is_empty() => break Ok(()),
            Ok(Ok(buf)) => {
                h.update(&buf);
                let _ = empty_tx.send(buf);
            }
            Ok(Err(e)) => break Err(e),
            Err(_) => break Err(io::Error::other("the reader thread stopped")),
        }
    };
    drop(empty_tx);
    drop(full_rx);
    let _ = reader_thread.join();
    outcome.map(|()| h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_in_memory_digest_at_chunk_boundaries() {
        for len in [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 17] {
            let data: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
            let got = sha256(io::Cursor::new(data.clone())).unwrap();
            assert_eq!(got, verdict_core::digest::raw(&data), "{len}");
        }
    }

    #[test]
    fn read_errors_are_reported() {
        struct Failing(usize);
        impl Read for Failing {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.0 == 0 {
                    return Err(io::Error::other("disk on fire"));
                }
                let n = buf.len().min(self.0);
                self.0 -= n;
                Ok(n)
            }
        }
        let err = sha256(Failing(CHUNK * 2 + 5)).unwrap_err();
        assert!(err.to_string().contains("disk on fire"));
    }
}
