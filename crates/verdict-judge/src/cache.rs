//! Caching valid results.
//!
//! A result may be reused only when everything that shaped it is the same: the criteria
//! revision, the template, the provider with its model and parameters, the sampling, the exact
//! context (its digest covers the subject, generation, criteria, data and budget) and the reply
//! schema version, and the criteria the policy waives the ref rule for. The key is the digest of
//! all of these. Only valid results are stored; failures never are, so a transient outage is not
//! remembered as an answer. A result read back is checked against the run's context again
//! before it is served (see `Judge`), so an entry damaged or edited on disk is a miss, never a
//! different answer.
//!
//! [`FileCache`] keeps one file per key in a directory (`verdict verify` uses
//! `$VERDICT_HOME/judge-cache`); deleting the directory clears it.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Mutex;
use verdict_core::contracts::{CriterionRow, Disposition, Finding, Id, Name, Runtime};
use verdict_core::digest::{self, Digest};

/// The key of a cached result.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CacheKey(pub Digest);

/// What determines a result, for its cache key.
#[derive(Debug, Clone, Copy)]
pub struct KeyParts<'a> {
    /// The criteria revision.
    pub criteria_revision: &'a Name,
    /// Digest of the class instructions.
    pub template_digest: &'a Digest,
    /// The provider's identity (endpoint or program, model, parameters).
    pub provider: &'a Value,
    /// Output cap.
    pub max_output_tokens: u32,
    /// Samples and needed valid samples.
    pub sampling: (u32, u32),
    /// The context digest.
    pub context_digest: &'a Digest,
    /// The reply schema version.
    pub schema_version: &'a str,
    /// The criteria whose passes may cite no ref (they change which replies are valid).
    pub refs_waived: &'a [Id],
}

impl KeyParts<'_> {
    /// The key: raw SHA-256 of the canonical form of all parts.
    #[must_use]
    pub fn key(&self) -> CacheKey {
        let mut waived: Vec<&str> = self.refs_waived.iter().map(Id::as_str).collect();
        waived.sort_unstable();
        waived.dedup();
        let doc = json!({
            "criteria_revision": self.criteria_revision,
            "template_digest": self.template_digest,
            "provider": self.provider,
            "max_output_tokens": self.max_output_tokens,
            "sampling": [self.sampling.0, self.sampling.1],
            "context_digest": self.context_digest,
            "schema_version": self.schema_version,
            "refs_waived": waived,
        });
        CacheKey(digest::raw(&verdict_core::canonical::to_vec(&doc)))
    }
}

/// A valid, combined result as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CachedResult {
    /// Rows.
    pub criteria: Vec<CriterionRow>,
    /// Findings.
    pub findings: Vec<Finding>,
    /// Dispositions.
    pub dispositions: Vec<Disposition>,
    /// The runtime that produced it.
    pub runtime: Runtime,
}

/// Somewhere to keep valid results.
pub trait ResultCache: Send + Sync {
    /// The result stored under `key`.
    fn get(&self, key: &CacheKey) -> Option<CachedResult>;
    /// Stores a valid result.
    fn put(&self, key: CacheKey, value: CachedResult);
}

/// An in-process cache.
#[derive(Debug, Default)]
pub struct MemoryCache {
    map: Mutex<BTreeMap<CacheKey, CachedResult>>,
}

impl MemoryCache {
    /// An empty cache.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// How many results are stored.
    #[must_use]
    pub fn len(&self) -> usize {
        self.map.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// Whether nothing is stored.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl ResultCache for MemoryCache {
    fn get(&self, key: &CacheKey) -> Option<CachedResult> {
        // A poisoned lock means a writer panicked mid-way: serve nothing from it.
        self.map.lock().ok()?.get(key).cloned()
    }

    fn put(&self, key: CacheKey, value: CachedResult) {
        if let Ok(mut m) = self.map.lock() {
            m.insert(key, value);
        }
    }
}

/// A cache on disk: one file per key, `<hex of the key>.json`, holding the key and the result.
/// A file is written whole under a temporary name and renamed into place, so a reader never
/// sees half of one; anything unreadable, malformed or filed under another key is a miss.
#[derive(Debug, Clone)]
pub struct FileCache {
    dir: std::path::PathBuf,
}

/// One file of a [`FileCache`].
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    key: CacheKey,
    result: CachedResult,
}

impl FileCache {
    /// A cache in `dir`, created (owner-only on unix) when first written to.
    #[must_use]
    pub fn new(dir: impl Into<std::path::PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The directory.
    #[must_use]
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    fn path(&self, key: &CacheKey) -> std::path::PathBuf {
        let hex = key.0.as_str().trim_start_matches("sha256:");
        self.dir.join(format!("{hex}.json"))
    }

    fn write(&self, key: CacheKey, value: CachedResult) -> std::io::Result<()> {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&self.dir)?;
        let path = self.path(&key);
        let bytes = serde_json::to_vec(&Entry { key, result: value })
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let mut nonce = [0u8; 8];
        getrandom::fill(&mut nonce).map_err(|e| std::io::Error::other(e.to_string()))?;
        let tmp = path.with_extension(format!(
            "tmp-{}",
            nonce.iter().map(|b| format!("{b:02x}")).collect::<String>()
        ));
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, &path).inspect_err(|_| {
            // Nothing half-written is left behind.
            let _ = std::fs::remove_file(&tmp);
        })
    }
}

impl ResultCache for FileCache {
    fn get(&self, key: &CacheKey) -> Option<CachedResult> {
        let bytes = std::fs::read(self.path(key)).ok()?;
        let doc = verdict_core::json::parse(&bytes).ok()?;
        let entry: Entry = verdict_core::contracts::decode_plain(&doc).ok()?;
        (entry.key == *key).then_some(entry.result)
    }

    fn put(&self, key: CacheKey, value: CachedResult) {
        // A cache that cannot be written only costs a call next time.
        let _ = self.write(key, value);
    }
}
