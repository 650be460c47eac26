//! Signed checkpoints: an ed25519 signature over `{seq, head}` of the audit chain, so the chain
//! can be checked against something kept outside the database.
//!
//! The signed message is `"verdict:audit-checkpoint:v1" + 0x00 + JCS({"head", "schema", "seq"})`.
//! A key file holds the 32-byte secret key as 64 hex digits; it is created with mode 0600 and
//! never overwritten.

use crate::audit::ChainHead;
use crate::error::{Result, StoreError};
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::path::Path;
use verdict_core::canonical;

/// The schema tag of a checkpoint.
pub const CHECKPOINT_SCHEMA: &str = "verdict.audit-checkpoint/v1";

/// A signed statement that the chain's event `seq` has hash `head`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// [`CHECKPOINT_SCHEMA`].
    pub schema: String,
    /// The seq of the head event.
    pub seq: u64,
    /// The hash of the head event.
    pub head: String,
    /// The signer's ed25519 public key, 64 hex digits.
    pub public_key: String,
    /// The ed25519 signature, 128 hex digits.
    pub signature: String,
}

fn message(seq: u64, head: &str) -> Vec<u8> {
    let mut m = b"verdict:audit-checkpoint:v1\0".to_vec();
    m.extend_from_slice(&canonical::to_vec(&json!({
        "schema": CHECKPOINT_SCHEMA,
        "seq": seq,
        "head": head,
    })));
    m
}

impl Checkpoint {
    /// Signs `head` with `key`.
    #[must_use]
    pub fn sign(key: &SigningKey, head: &ChainHead) -> Self {
        let sig = key.sign(&message(head.seq, &head.hash));
        Self {
            schema: CHECKPOINT_SCHEMA.to_owned(),
            seq: head.seq,
            head: head.hash.clone(),
            public_key: hex(key.verifying_key().as_bytes()),
            signature: hex(&sig.to_bytes()),
        }
    }

    /// Checks the signature, and that it was made by `trusted` (a checkpoint signed by anyone
    /// else proves nothing).
    pub fn verify(&self, trusted: &VerifyingKey) -> Result<()> {
        if self.schema != CHECKPOINT_SCHEMA {
            return Err(StoreError::Checkpoint(format!(
                "schema {:?} is not {CHECKPOINT_SCHEMA}",
                self.schema
            )));
        }
        let embedded = parse_public_key(&self.public_key)?;
        if embedded != *trusted {
            return Err(StoreError::Checkpoint(format!(
                "signed by key {} , not by the trusted key {}",
                self.public_key,
                hex(trusted.as_bytes())
            )));
        }
        let bytes: [u8; 64] = unhex(&self.signature)
            .and_then(|v| v.try_into().ok())
            .ok_or_else(|| StoreError::Checkpoint("signature is not 128 hex digits".into()))?;
        trusted
            .verify_strict(
                &message(self.seq, &self.head),
                &Signature::from_bytes(&bytes),
            )
            .map_err(|_| {
                StoreError::Checkpoint(format!(
                    "signature does not verify for seq {} head {}",
                    self.seq, self.head
                ))
            })
    }

    /// Reads a checkpoint file.
    pub fn read(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|source| StoreError::Io {
            path: path.to_owned(),
            source,
        })?;
        let value = verdict_core::json::parse(&bytes)
            .map_err(|e| StoreError::Checkpoint(format!("{}: {e}", path.display())))?;
        serde_json::from_value(value)
            .map_err(|e| StoreError::Checkpoint(format!("{}: {e}", path.display())))
    }

    /// The checkpoint as pretty JSON with a final newline.
    #[must_use]
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

/// A fresh signing key from the operating system's random source.
pub fn generate_key() -> Result<SigningKey> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret)
        .map_err(|e| StoreError::Checkpoint(format!("no randomness: {e}")))?;
    Ok(SigningKey::from_bytes(&secret))
}

/// Writes `key` to a new file readable by its owner only; refuses to overwrite.
pub fn write_key_file(path: &Path, key: &SigningKey) -> Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let io = |source| StoreError::Io {
        path: path.to_owned(),
        source,
    };
    let mut file = options.open(path).map_err(io)?;
    file.write_all(format!("{}\n", hex(key.as_bytes())).as_bytes())
        .map_err(io)?;
    file.sync_all().map_err(io)
}

/// Reads a key file written by [`write_key_file`].
pub fn read_key_file(path: &Path) -> Result<SigningKey> {
    let text = std::fs::read_to_string(path).map_err(|source| StoreError::Io {
        path: path.to_owned(),
        source,
    })?;
    let bytes: [u8; 32] = unhex(text.trim())
        .and_then(|v| v.try_into().ok())
        .ok_or_else(|| {
            StoreError::Checkpoint(format!(
                "{}: not a key file (64 hex digits)",
                path.display()
            ))
        })?;
    Ok(SigningKey::from_bytes(&bytes))
}

/// Parses a public key of 64 hex digits.
pub fn parse_public_key(text: &str) -> Result<VerifyingKey> {
    let bytes: [u8; 32] = unhex(text.trim())
        .and_then(|v| v.try_into().ok())
        .ok_or_else(|| {
            StoreError::Checkpoint(format!("public key {text:?} is not 64 hex digits"))
        })?;
    VerifyingKey::from_bytes(&bytes)
        .map_err(|e| StoreError::Checkpoint(format!("public key {text:?}: {e}")))
}

/// Lowercase hex of `bytes` (the workspace's one encoder).
pub use verdict_core::digest::hex;
use verdict_core::digest::unhex;

#[cfg(test)]
mod tests {
    use super::*;

    fn head() -> ChainHead {
        ChainHead {
            seq: 7,
            hash: format!("sha256:{}", "ab".repeat(32)),
        }
    }

    #[test]
    fn signed_checkpoint_verifies_only_with_its_key() {
        let key = generate_key().unwrap();
        let cp = Checkpoint::sign(&key, &head());
        cp.verify(&key.verifying_key()).unwrap();
        let other = generate_key().unwrap();
        assert!(cp.verify(&other.verifying_key()).is_err());
    }

    #[test]
    fn altered_checkpoint_fails() {
        let key = generate_key().unwrap();
        let cp = Checkpoint::sign(&key, &head());
        let mut later = cp.clone();
        later.seq = 8;
        assert!(later.verify(&key.verifying_key()).is_err());
        let mut rehead = cp.clone();
        rehead.head = format!("sha256:{}", "cd".repeat(32));
        assert!(rehead.verify(&key.verifying_key()).is_err());
        // A forger who swaps in their own key and signature is refused by the trusted key.
        let forger = generate_key().unwrap();
        let forged = Checkpoint::sign(
            &forger,
            &ChainHead {
                seq: 7,
                hash: rehead.head.clone(),
            },
        );
        assert!(forged.verify(&key.verifying_key()).is_err());
    }

    #[test]
    fn key_files_round_trip_and_are_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.key");
        let key = generate_key().unwrap();
        write_key_file(&path, &key).unwrap();
        assert_eq!(read_key_file(&path).unwrap().to_bytes(), key.to_bytes());
        assert!(write_key_file(&path, &generate_key().unwrap()).is_err());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            assert_eq!(
                std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o600
            );
        }
        assert!(parse_public_key("zz").is_err());
    }
}
