//! Blobs: the bytes a subject names by raw digest (its objective, its resources, its checks'
//! definitions), kept in the store under that digest.
//!
//! Who puts: producers, operators and runners, whoever holds the bytes; the digest the caller
//! names must be the SHA-256 of the bytes given. No grant is needed: bytes are about no
//! execution until a subject names them, and putting them proves only that the caller holds
//! them. Every principal that puts them is recorded (the first as the blob's writer, each later
//! one once as a holder; the bytes are kept once). Who reads: an operator; a principal that put
//! them; anyone whose grant (in force at the store's time) covers a stored subject that names
//! the digest and vouches for it: one stored after the bytes (so its producer was held to the
//! rule below) or whose producer put them. Anyone else is answered exactly as for bytes that
//! are not stored ([`EngineError::NotFound`]), so a refusal does not tell whether they exist;
//! when they do, the refusal is recorded as a denial like every other.
//!
//! A subject names only stored bytes its producer may read: ones it put, or ones a subject of
//! an execution it holds a grant on names and vouches for. Otherwise a digest learnt elsewhere,
//! named in a subject of one's own, would read another execution's bytes.

use crate::engine::{Engine, Principal};
use crate::error::{EngineError, Result, invalid};
use schemars::JsonSchema;
use serde::Serialize;
use verdict_core::contracts::{Role, Subject, Timestamp};
use verdict_core::digest::Digest;
use verdict_store::{About, BlobRecord, DocKind, Grant, MAX_BLOB_BYTES, ScopeKind, Stored, Table};

/// Subjects read at once while looking for one under a mission grant that names a digest.
const SUBJECT_PAGE: u32 = 500;

/// A stored blob's record, without its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct BlobInfo {
    /// The raw digest of the bytes: `sha256:` and the lowercase hex SHA-256.
    #[schemars(with = "String")]
    pub digest: Digest,
    /// Their length in bytes.
    pub size: u64,
    /// The media type given when they were first put, if any.
    pub media_type: Option<String>,
    /// The principal that put them first.
    pub writer: String,
    /// When, on the store's clock.
    #[schemars(with = "String")]
    pub stored_at: Timestamp,
}

/// What a put did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct BlobPut {
    /// The blob as stored (the first put's record when it was stored already).
    pub blob: BlobInfo,
    /// Whether this put stored it (false: the same bytes were stored already).
    pub inserted: bool,
}

/// A stored blob with its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// Its record.
    pub info: BlobInfo,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// Which part of a subject names a digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NamedBy {
    /// `objective.digest`.
    Objective,
    /// A `resources[].digest`.
    Resource,
    /// A `checks[].definition_digest`.
    CheckDefinition,
}

/// One digest a subject names, and whether its bytes are stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct SubjectBlob {
    /// `objective`, the resource's name, or the check's id.
    pub name: String,
    /// Which part of the subject names it.
    pub kind: NamedBy,
    /// The raw digest named.
    #[schemars(with = "String")]
    pub digest: Digest,
    /// Whether bytes are stored under it.
    pub stored: bool,
    /// Their length, when stored.
    pub size: Option<u64>,
}

impl BlobInfo {
    fn from_row(row: &Stored) -> Result<Self> {
        let r: BlobRecord = row.decode()?;
        Ok(Self {
            digest: r.digest,
            size: r.size,
            media_type: r.media_type,
            writer: r.writer.to_string(),
            stored_at: r.stored_at,
        })
    }
}

/// The digests a subject names, in its order: the objective, each resource, each check pin.
fn named(subject: &Subject) -> Vec<(String, NamedBy, &Digest)> {
    std::iter::once((
        "objective".to_owned(),
        NamedBy::Objective,
        &subject.objective.digest,
    ))
    .chain(
        subject
            .resources
            .iter()
            .map(|r| (r.name.to_string(), NamedBy::Resource, &r.digest)),
    )
    .chain(subject.checks.iter().map(|c| {
        (
            c.id.to_string(),
            NamedBy::CheckDefinition,
            &c.definition_digest,
        )
    }))
    .collect()
}

fn parse_digest(digest: &str) -> Result<Digest> {
    digest
        .parse()
        .map_err(|e| invalid("blob digest")(format!("{digest:?}: {e}")))
}

impl Engine {
    /// Stores `bytes` under `digest` (producers, operators and runners; anyone else is refused
    /// and the refusal recorded). `digest` must be the raw digest of the bytes, which are at
    /// most [`MAX_BLOB_BYTES`]; a mismatch or an oversized body is refused with nothing
    /// written. The same bytes put again store nothing and return the stored record.
    pub async fn put_blob(
        &self,
        caller: &Principal,
        digest: &str,
        bytes: &[u8],
        media_type: Option<&str>,
    ) -> Result<BlobPut> {
        self.require_role(
            caller,
            &[Role::Producer, Role::Operator, Role::Runner],
            "put blobs",
        )
        .await?;
        let expected = parse_digest(digest)?;
        if bytes.len() > MAX_BLOB_BYTES {
            return Err(invalid("blob")(format!(
                "{} bytes exceed the limit of {MAX_BLOB_BYTES} bytes",
                bytes.len()
            )));
        }
        let actual = verdict_core::digest::raw(bytes);
        if actual != expected {
            return Err(invalid("blob")(format!(
                "the bytes hash to {actual}, not to the digest named, {expected}"
            )));
        }
        let row = self
            .store
            .put_blob(&caller.actor(), bytes, media_type)
            .await?;
        Ok(BlobPut {
            blob: BlobInfo::from_row(&row)?,
            inserted: row.inserted,
        })
    }

    /// The record of the blob stored under `digest`, if `caller` may read it (see the module
    /// documentation); otherwise, as when nothing is stored, [`EngineError::NotFound`].
    pub async fn blob_info(&self, caller: &Principal, digest: &str) -> Result<BlobInfo> {
        let digest = parse_digest(digest)?;
        let not_found = || EngineError::NotFound {
            what: "blob",
            key: digest.to_string(),
        };
        let Some(row) = self.store.blob_record(&digest).await? else {
            return Err(not_found());
        };
        let info = BlobInfo::from_row(&row)?;
        if caller.role() == Role::Operator
            || self
                .store
                .blob_put_by(&digest, caller.name().as_str())
                .await?
            || self
                .a_subject_vouches_for(caller.name().as_str(), &digest, row.seq)
                .await?
        {
            return Ok(info);
        }
        // Refused like any read out of scope, and recorded; answered as "not stored".
        match self
            .deny_read(
                caller,
                format!("blob {digest}"),
                "it did not put it, and no grant in force covers a subject that names it",
            )
            .await
        {
            err @ EngineError::DenialNotRecorded { .. } => Err(err),
            _ => Err(not_found()),
        }
    }

    /// The bytes and record of the blob stored under `digest`, read as [`Engine::blob_info`].
    pub async fn blob(&self, caller: &Principal, digest: &str) -> Result<Blob> {
        let info = self.blob_info(caller, digest).await?;
        let (_, bytes) =
            self.store
                .blob(&info.digest)
                .await?
                .ok_or_else(|| EngineError::NotFound {
                    what: "blob",
                    key: info.digest.to_string(),
                })?;
        Ok(Blob { info, bytes })
    }

    /// Which of a subject's named digests have bytes stored (objective, resources, check
    /// definitions, in the subject's order), for a caller that may read the subject.
    pub async fn subject_blobs(
        &self,
        caller: &Principal,
        subject_digest: &str,
    ) -> Result<Vec<SubjectBlob>> {
        let digest: Digest = subject_digest
            .parse()
            .map_err(|e| invalid("subject digest")(format!("{subject_digest:?}: {e}")))?;
        let asked = format!("the blobs of subject {digest}");
        let subject = match self.subject(&digest).await {
            Ok(subject) => subject,
            // Refused in the same words as a subject out of scope.
            Err(EngineError::NotFound { .. }) if caller.role() != Role::Operator => {
                return Err(self.deny_unseen(caller, asked).await);
            }
            Err(e) => return Err(e),
        };
        self.require_read_subject(caller, &subject, asked).await?;
        let mut out = Vec::new();
        for (name, kind, digest) in named(&subject) {
            let size = match self.store.blob_record(digest).await? {
                Some(row) => Some(BlobInfo::from_row(&row)?.size),
                None => None,
            };
            out.push(SubjectBlob {
                name,
                kind,
                digest: digest.clone(),
                stored: size.is_some(),
                size,
            });
        }
        Ok(out)
    }

    /// Refuses, recording the denial, a subject naming stored bytes its producer may not read:
    /// bytes it did not put that no subject vouching for them names under a grant in force it
    /// holds. A digest with no bytes stored is not refused (the bytes may come later); the
    /// subject then vouches for them only if its producer puts them.
    pub(crate) async fn require_named_blobs_readable(
        &self,
        caller: &Principal,
        subject: &Subject,
    ) -> Result<()> {
        let producer = subject.producer.principal.as_str();
        for (name, _, digest) in named(subject) {
            let Some(row) = self.store.blob_record(digest).await? else {
                continue;
            };
            if self.store.blob_put_by(digest, producer).await?
                || self
                    .a_subject_vouches_for(producer, digest, row.seq)
                    .await?
            {
                continue;
            }
            let err = EngineError::PermissionDenied {
                principal: caller.name().to_string(),
                role: caller.role().as_str(),
                action: "put a subject".into(),
                why: format!(
                    "it names blob {digest} ({name}), which producer {producer:?} did not put and no subject of an execution it holds a grant on names"
                ),
            };
            return Err(self.deny(caller, err).await);
        }
        Ok(())
    }

    /// Whether a stored subject covered by a grant `principal` holds in force names `digest`
    /// (whose bytes were stored at `blob_seq`) and vouches for it: stored after the bytes, so
    /// its producer was held to [`Engine::require_named_blobs_readable`], or produced by a
    /// principal that put them. Only a grant in force can make one count, so the grants are
    /// read first, once, at the store's time: with none, no subject is read. An execution
    /// grant is decided by that execution's subjects alone. Only a mission grant, which no
    /// index maps to its subjects, walks the subjects a page at a time, each matched against
    /// the grants already read.
    async fn a_subject_vouches_for(
        &self,
        principal: &str,
        digest: &Digest,
        blob_seq: u64,
    ) -> Result<bool> {
        let now = self.now().await?;
        let grants: Vec<Grant> = self
            .store
            .grants_for(principal)
            .await?
            .into_iter()
            .filter(|g| g.is_active(&now))
            .collect();
        let names = |subject: &Subject| named(subject).iter().any(|(_, _, d)| *d == digest);
        for g in grants
            .iter()
            .filter(|g| g.record.scope.kind == ScopeKind::Execution)
        {
            let about = About::Execution(g.record.scope.id.as_str().to_owned());
            for row in self.store.list(DocKind::Subject, &about).await? {
                let subject: Subject = row.decode()?;
                if g.covers(&subject)
                    && names(&subject)
                    && self.vouches(&row, &subject, digest, blob_seq).await?
                {
                    return Ok(true);
                }
            }
        }
        if !grants
            .iter()
            .any(|g| g.record.scope.kind == ScopeKind::Mission)
        {
            return Ok(false);
        }
        let mut after = 0;
        loop {
            let page = self
                .store
                .rows(Table::Subjects, after, SUBJECT_PAGE)
                .await?;
            for row in &page {
                after = row.seq;
                let subject: Subject = row.decode()?;
                if names(&subject)
                    && grants.iter().any(|g| g.covers(&subject))
                    && self.vouches(row, &subject, digest, blob_seq).await?
                {
                    return Ok(true);
                }
            }
            if page.len() < usize::try_from(SUBJECT_PAGE).unwrap_or(usize::MAX) {
                return Ok(false);
            }
        }
    }

    /// Whether stored subject `row` vouches for the bytes it names under `digest`, stored at
    /// `blob_seq`: a subject stored before them was never checked against them, so it counts
    /// only if its producer put them.
    async fn vouches(
        &self,
        row: &Stored,
        subject: &Subject,
        digest: &Digest,
        blob_seq: u64,
    ) -> Result<bool> {
        Ok(row.seq > blob_seq
            || self
                .store
                .blob_put_by(digest, subject.producer.principal.as_str())
                .await?)
    }
}
