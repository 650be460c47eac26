-- verdict store, PostgreSQL schema version 27: a subject names only bytes its producer may read.
--
-- A blob is read by the principal that put it and by whoever holds a grant covering a subject
-- that names it. Any subject could name any stored digest, so a producer that learnt another
-- execution's digest could name it in a subject of its own and then read those bytes through
-- it. What changes:
-- - verdict.blob_holders records each later principal that put a blob's bytes (the first is the
--   blob's own writer): a blob record naming that principal as writer, hashed under the domain
--   `store.blob-holder` and keyed by that digest, at most one per blob and principal (`blob`
--   and `holder` are derived from the body), appended with its audit event by put_blobs when it
--   is given bytes stored already by someone else. The bytes are not stored again. No role
--   writes the table but through put_blobs; it is append-only like every table.
-- - A subject is stored (put_subjects, put_one_subjects, by a trigger on subjects) only if each
--   digest it names (its objective's, its resources', its checks' definitions') that has bytes
--   stored is one its producer may read: one it put itself (the blob's writer or a holder), or
--   one already named by a subject of an execution (or mission) on which it holds a grant in
--   force. Otherwise SQLSTATE 42501 and nothing is appended. A digest with no bytes stored is
--   not checked here; the engine reads it through such a subject only when the subject was
--   stored after the bytes or its producer holds them.
-- A superuser connection with no role set is not bound by the trigger, as by the identity
-- check.
-- - job_claim takes a checks or verify job only if the claimant holds a grant in force at the
--   store's time, not revoked, on the execution (or mission) of its request's subject: with
--   write access for a checks job, whose evidence needs it, any for a verify job. A job no
--   grant covers is skipped, still under FOR UPDATE SKIP LOCKED, and left for a worker that may
--   do it; gate jobs are claimed as before (under a stored operator's name). job_claim is
--   spliced like put_blobs.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

CREATE TABLE verdict.blob_holders (
    seq bigint NOT NULL UNIQUE,
    key text PRIMARY KEY,
    digest text NOT NULL,
    body text NOT NULL,
    blob text NOT NULL,
    holder text NOT NULL,
    UNIQUE (blob, holder)
);

CREATE TRIGGER blob_holders_append_only BEFORE UPDATE OR DELETE ON verdict.blob_holders
    FOR EACH ROW EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER blob_holders_no_truncate BEFORE TRUNCATE ON verdict.blob_holders
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.refuse_change();

REVOKE ALL ON verdict.blob_holders FROM PUBLIC;
GRANT SELECT ON verdict.blob_holders
    TO __OPERATOR__, __PRODUCER__, __RUNNER__, __VERIFIER__, __HUMAN__, __GATE__, __SYSTEM__, __SERVICE__;
REVOKE UPDATE, DELETE, TRUNCATE ON verdict.blob_holders FROM __OWNER__;
ALTER TABLE verdict.blob_holders ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.blob_holders FORCE ROW LEVEL SECURITY;
-- Read as schema 23 scopes reads: everything by the identities that act for no principal; by a
-- principal's group, its own holdings and those of the blobs it may read. A later holder reads
-- the bytes it put as the first writer does.
CREATE POLICY blob_holders_read_all ON verdict.blob_holders FOR SELECT
    TO __OWNER__, __OPERATOR__, __GATE__, __SYSTEM__, __SERVICE__, __ENGINE__ USING (true);
CREATE POLICY blob_holders_read_granted ON verdict.blob_holders FOR SELECT
    TO __PRODUCER__, __RUNNER__, __VERIFIER__, __HUMAN__
    USING (holder = verdict._reader() OR verdict._reads_blob(blob));
DROP POLICY blobs_read_granted ON verdict.blobs;
CREATE POLICY blobs_read_granted ON verdict.blobs FOR SELECT
    TO __PRODUCER__, __RUNNER__, __VERIFIER__, __HUMAN__
    USING (verdict._reader_wrote(seq) OR verdict._reads_blob(key)
        OR EXISTS (SELECT 1 FROM verdict.blob_holders h
            WHERE h.blob = key AND h.holder = verdict._reader()));
CREATE POLICY blob_holders_append ON verdict.blob_holders FOR INSERT TO __OWNER__ WITH CHECK (true);
COMMENT ON COLUMN verdict.blob_holders.blob IS
    'derived from the body by the write routine: ((body)::jsonb ->> ''digest''::text)';
COMMENT ON COLUMN verdict.blob_holders.holder IS
    'derived from the body by the write routine: ((body)::jsonb ->> ''writer''::text)';

-- put_blobs is spliced (each marker must occur exactly once), so that every check earlier
-- migrations put into it stays as it is.
DO $make$
DECLARE
    v_def text;
    v_marker text;
    v_hits integer;
    v_block text;
BEGIN
    v_def := pg_get_functiondef(
        'verdict.put_blobs(text, text, text, text, text, text, bytea)'::regprocedure);
    v_marker := E'    v_actual text;\n';
    v_hits := (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker);
    IF v_hits <> 1 THEN
        RAISE EXCEPTION 'put_blobs: the declaration of v_actual occurs % times, not once', v_hits;
    END IF;
    v_def := replace(v_def, v_marker, v_marker || E'    v_holder text;\n');
    v_marker := E'    IF FOUND THEN\n        RETURN r;\n    END IF;\n';
    v_hits := (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker);
    IF v_hits <> 1 THEN
        RAISE EXCEPTION 'put_blobs: the return of a stored blob occurs % times, not once', v_hits;
    END IF;
    v_block := format($block$    IF FOUND THEN
        -- Another principal holding the same bytes is recorded once, without the bytes.
        IF (r.r_body::jsonb ->> 'writer') IS DISTINCT FROM p_principal
            AND NOT EXISTS (SELECT 1 FROM verdict.blob_holders h
                WHERE h.blob = p_key AND h.holder = p_principal) THEN
            v_holder := 'sha256:' || encode(sha256(%L::bytea || convert_to(p_body, 'UTF8')), 'hex');
            SELECT e.seq + 1, e.hash INTO v_seq, v_prev
                FROM verdict.audit_events e ORDER BY e.seq DESC LIMIT 1;
            v_at := to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"');
            INSERT INTO verdict.audit_events (seq, prev_hash, hash, event_type, tbl, key, principal,
                role, payload_digest, correlation, recorded_at)
            VALUES (v_seq, v_prev, 'sha256:' || encode(sha256(%L::bytea || convert_to(format(%L,
                    coalesce(to_json(p_correlation)::text, 'null'), to_json(v_holder), v_holder,
                    to_json(v_prev), to_json(p_principal), v_at, p_role, v_seq), 'UTF8')), 'hex'),
                'append', 'blob_holders', v_holder, p_principal, p_role, v_holder, p_correlation, v_at);
            INSERT INTO verdict.blob_holders (seq, key, digest, body, blob, holder)
            VALUES (v_seq, v_holder, v_holder, p_body, p_key, p_principal);
        END IF;
        RETURN r;
    END IF;
$block$,
        '\x' || encode(convert_to('verdict:store.blob-holder:v1', 'UTF8') || '\x00'::bytea, 'hex'),
        '\x' || encode(convert_to('verdict:audit-event:v1', 'UTF8') || '\x00'::bytea, 'hex'),
        '{"correlation":%s,"event_type":"append","key":%s,"payload_digest":"%s","prev_hash":%s,'
            || '"principal":%s,"recorded_at":"%s","role":"%s","seq":%s,"table":"blob_holders"}');
    EXECUTE replace(v_def, v_marker, v_block);
END $make$;

-- The raw digests a subject names: its objective's, each resource's, each check's definition.
CREATE FUNCTION verdict._named_digests(p_subject jsonb) RETURNS SETOF text
LANGUAGE plpgsql IMMUTABLE SET search_path = verdict, pg_temp AS $$
BEGIN
    RETURN QUERY SELECT p_subject #>> '{objective,digest}'
    UNION
    SELECT r ->> 'digest' FROM jsonb_array_elements(CASE WHEN jsonb_typeof(p_subject -> 'resources')
        = 'array' THEN p_subject -> 'resources' ELSE '[]'::jsonb END) r
    UNION
    SELECT c ->> 'definition_digest' FROM jsonb_array_elements(CASE WHEN jsonb_typeof(p_subject -> 'checks')
        = 'array' THEN p_subject -> 'checks' ELSE '[]'::jsonb END) c;
END $$;
REVOKE ALL ON FUNCTION verdict._named_digests(jsonb) FROM PUBLIC;

-- Whether `p_principal` put the bytes of blob `p_blob`, first (the blob's writer) or later (a
-- holder).
CREATE FUNCTION verdict._blob_put_by(p_principal text, p_blob text) RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path = verdict, pg_temp AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM verdict.blobs b WHERE b.key = p_blob
            AND (b.body::jsonb ->> 'writer') = p_principal)
        OR EXISTS (SELECT 1 FROM verdict.blob_holders h
            WHERE h.blob = p_blob AND h.holder = p_principal);
END $$;
REVOKE ALL ON FUNCTION verdict._blob_put_by(text, text) FROM PUBLIC;

-- Whether `p_principal` may name blob `p_blob` in a subject: it put the bytes, or a subject of
-- an execution or mission it holds a grant in force on names them and vouches for them (it
-- was stored after the bytes, so this check held its producer, or its producer put them).
CREATE FUNCTION verdict._may_name_blob(p_principal text, p_blob text) RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path = verdict, pg_temp AS $$
BEGIN
    RETURN verdict._blob_put_by(p_principal, p_blob)
        OR EXISTS (SELECT 1 FROM verdict.grants g JOIN verdict.subjects s
                ON (g.scope_kind = 'execution' AND s.execution_id = g.scope_id)
                OR (g.scope_kind = 'mission' AND (s.body::jsonb ->> 'mission') = g.scope_id)
            WHERE g.principal = p_principal
              AND verdict._grant_in_force(p_principal, s.execution_id, s.body::jsonb ->> 'mission', NULL)
              AND p_blob IN (SELECT verdict._named_digests(s.body::jsonb))
              AND (s.seq > (SELECT b.seq FROM verdict.blobs b WHERE b.key = p_blob)
                OR verdict._blob_put_by(s.body::jsonb #>> '{producer,principal}', p_blob)));
END $$;
REVOKE ALL ON FUNCTION verdict._may_name_blob(text, text) FROM PUBLIC;

CREATE FUNCTION verdict._subject_names_only_readable_blobs() RETURNS trigger
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_doc jsonb;
    v_producer text;
    v_blob text;
BEGIN
    IF verdict._unbound_superuser() THEN
        RETURN NEW;
    END IF;
    v_doc := NEW.body::jsonb;
    v_producer := v_doc #>> '{producer,principal}';
    FOR v_blob IN SELECT b.key FROM verdict.blobs b
            WHERE b.key IN (SELECT verdict._named_digests(v_doc)) ORDER BY b.key LOOP
        IF NOT verdict._may_name_blob(v_producer, v_blob) THEN
            RAISE EXCEPTION 'subject %: producer % names blob %, which it did not put and which no subject of an execution it holds a grant on names',
                NEW.key, coalesce(v_producer, 'none'), v_blob USING ERRCODE = '42501';
        END IF;
    END LOOP;
    RETURN NEW;
END $$;
REVOKE ALL ON FUNCTION verdict._subject_names_only_readable_blobs() FROM PUBLIC;
CREATE TRIGGER subjects_name_only_readable_blobs BEFORE INSERT ON verdict.subjects
    FOR EACH ROW EXECUTE FUNCTION verdict._subject_names_only_readable_blobs();

-- Whether `p_principal` may work a job of `p_kind` for request `p_request` at `p_now`: a grant
-- in force, not revoked, on the execution or mission of the request's subject, with write
-- access for checks. The request, its subject and the principal's grants are each found by
-- their indexes.
CREATE FUNCTION verdict._job_covered(p_principal text, p_kind text, p_request text,
    p_now timestamptz) RETURNS boolean
LANGUAGE sql STABLE SET search_path = verdict, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM verdict.verification_requests q
        JOIN verdict.subjects s ON s.key = q.subject_digest
        JOIN verdict.grants g ON g.principal = p_principal
            AND ((g.scope_kind = 'execution' AND g.scope_id = s.execution_id)
              OR (g.scope_kind = 'mission' AND g.scope_id = (s.body::jsonb ->> 'mission')))
        WHERE q.key = p_request
          AND (p_kind <> 'checks' OR (g.body::jsonb ->> 'access') = 'write')
          AND (g.body::jsonb ->> 'expires_at')::timestamptz > p_now
          AND NOT EXISTS (SELECT 1 FROM verdict.grant_revocations v WHERE v.grant_id = g.key))
$$;
REVOKE ALL ON FUNCTION verdict._job_covered(text, text, text, timestamptz) FROM PUBLIC;

DO $make$
DECLARE
    v_def text;
    v_marker text;
    v_hits integer;
BEGIN
    v_def := pg_get_functiondef('verdict.job_claim(text, text, text, text, bigint)'::regprocedure);
    v_marker := E'    ORDER BY coalesce(j.not_before, j.created_at), j.id\n    LIMIT 1\n    FOR UPDATE SKIP LOCKED;\n';
    v_hits := (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker);
    IF v_hits <> 1 THEN
        RAISE EXCEPTION 'job_claim: the claim''s ordering occurs % times, not once', v_hits;
    END IF;
    EXECUTE replace(v_def, v_marker,
        E'      -- Only a job the claimant''s grants cover (schema 27); gate jobs as before.\n'
        || E'      AND (j.kind = ''gate'' OR verdict._job_covered(p_principal, j.kind, j.request, v_now))\n'
        || v_marker);
END $make$;

RESET ROLE;
