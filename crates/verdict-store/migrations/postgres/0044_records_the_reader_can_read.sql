-- verdict store, PostgreSQL schema version 44: what a login stores, the store's reader reads;
-- what a subject names is what lets its reader read bytes.
--
-- Found by trying them through principals' own logins:
-- - put_blobs checked a blob record's digest, size, writer and media type, but not its
--   `stored_at` nor members it should not have. Bytes are stored once under their digest and
--   the first record is kept, so a record the store's reader refuses (`stored_at: "never"`)
--   broke those bytes for everyone for good: every subject pinning them (an empty file, a
--   licence) failed to be put. Now the record holds exactly digest, size, writer, stored_at (an
--   RFC 3339 UTC time the reader takes) and, optionally, a media_type the reader takes.
-- - _cas took any new value for a pointer whose change described it: a verifier's own login
--   set a request's admission lease to a value with a time the reader refuses, and every later
--   admission to that request failed reading it; a producer's login moved its own execution to
--   a head with an extra member, and every operator's listing of executions failed. Now an
--   execution's head is exactly `{generation, subject_digest}` (an integer from 0, a digest)
--   and a lease exactly `{expires_at, holder}`, an RFC 3339 UTC time and a name (cas_lease
--   holds a runner or verifier to its own name; an operator may hold one for another), as the
--   engine writes them.
-- - put_one_credential_changes took any string as `changed_at`; `audit verify` then reported
--   the row as modified for good. Now it is an RFC 3339 UTC time the reader takes.
-- - _reads_blob (schema 23) let a scoped reader read bytes whose digest appears anywhere in the
--   text of a subject it may read: a producer wrote another producer's digest into a criterion
--   of its own subject and read the bytes through its own login (and could name bytes not yet
--   stored, to read them once someone else stored them). Now the subject must name the digest
--   as its objective, a resource or a check definition, and vouch for the bytes as the
--   subjects' trigger (schema 27) does: stored after them, or put by a producer who put them.
-- - The blobs' read policy (schema 27) meant to let a later holder of the same bytes read
--   them, but compared the holders' own columns (`h.blob = key` named `h.key`), so it never
--   did. It now compares the holder's blob with the row's key.
-- - A job's holder, outcome and last error were any text of any length, from any login that may
--   claim, complete or fail a job (a runner's own, by hand: a 20 MB holder, a 100 MB outcome of
--   terminal escapes that `verdict jobs list` printed). Now a trigger refuses a holder of more
--   than 256 characters and keeps an outcome or an error to its first 4,000 characters, the cut
--   marked, whoever writes it (the engine's own errors can be long, and a job must still end).
-- - cas_lease let a runner or verifier take over a lease still held, another's or its own. Now,
--   but for an operator, a lease is taken only when none is held or the one held has lapsed at
--   the store's time, as the engine takes it. (A login may still release its own and take it
--   again in one transaction.)
-- A value already stored before this version is not repaired: the reader names it.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

-- Whether `p` is an instant as verdict's reader takes one: `YYYY-MM-DDTHH:MM:SS[.fraction]Z`,
-- a real calendar day, hours to 23, minutes and seconds to 59 (PostgreSQL itself would take a
-- 24:00:00 or a leap second the reader refuses).
CREATE FUNCTION verdict._rfc3339(p text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE SET search_path = verdict, pg_temp AS $$
BEGIN
    IF p IS NULL OR p !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?Z$'
        OR substr(p, 12, 2)::integer > 23 OR substr(p, 15, 2)::integer > 59
        OR substr(p, 18, 2)::integer > 59 THEN
        RETURN false;
    END IF;
    PERFORM make_date(substr(p, 1, 4)::integer, substr(p, 6, 2)::integer,
        substr(p, 9, 2)::integer);
    RETURN true;
EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format
    OR invalid_text_representation THEN
    RETURN false;
END $$;
REVOKE ALL ON FUNCTION verdict._rfc3339(text) FROM PUBLIC;

DO $migrate$
DECLARE
    v_def text;
    v_marker text;
BEGIN
    -- Blob records: exactly their members, a time the reader takes.
    v_def := pg_get_functiondef('verdict.put_blobs(text, text, text, text, text, text, bytea)'::regprocedure);
    v_marker := $m$    IF v_doc ? 'media_type' AND (jsonb_typeof(v_doc -> 'media_type') IS DISTINCT FROM 'string'$m$;
    IF (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker) <> 1 THEN
        RAISE EXCEPTION 'put_blobs: the media type check does not occur once';
    END IF;
    EXECUTE replace(v_def, v_marker, $c$    IF (v_doc - '{digest,media_type,size,stored_at,writer}'::text[]) <> '{}'::jsonb
        OR jsonb_typeof(v_doc -> 'stored_at') IS DISTINCT FROM 'string'
        OR NOT verdict._rfc3339(v_doc ->> 'stored_at')
        -- A media type as the reader takes it: visible ASCII or spaces, a type and a subtype.
        OR (v_doc ? 'media_type' AND (jsonb_typeof(v_doc -> 'media_type') IS DISTINCT FROM 'string'
            OR (v_doc ->> 'media_type') !~ '^[ -~]{1,255}$'
            OR btrim(split_part(v_doc ->> 'media_type', ';', 1), ' ') !~ '^[^/]+/[^/]+$')) THEN
        RAISE EXCEPTION 'blobs %: a blob record holds digest, size, writer, stored_at (an RFC 3339 UTC time) and a media type (visible ASCII, a type and a subtype), and nothing else',
            p_key USING ERRCODE = '22023';
    END IF;
$c$ || v_marker);

    -- Pointer values: an execution's head and a lease as the engine writes and reads them.
    v_def := pg_get_functiondef('verdict._cas(text, text[], text, text, text, bigint, text, text, text, text, text)'::regprocedure);
    v_marker := $m$    PERFORM verdict.take_chain_lock();
    SELECT revision, value INTO v_rev, v_val FROM verdict.pointers$m$;
    IF (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker) <> 1 THEN
        RAISE EXCEPTION '_cas: the chain lock before the pointer read does not occur once';
    END IF;
    EXECUTE replace(v_def, v_marker, $c$    IF p_new IS NOT NULL AND p_pointer = 'execution' AND (
            jsonb_typeof(p_new::jsonb) IS DISTINCT FROM 'object'
            OR (p_new::jsonb - '{generation,subject_digest}'::text[]) <> '{}'::jsonb
            OR jsonb_typeof(p_new::jsonb -> 'generation') IS DISTINCT FROM 'number'
            OR (p_new::jsonb ->> 'generation') !~ '^(0|[1-9][0-9]{0,15})$'
            OR jsonb_typeof(p_new::jsonb -> 'subject_digest') IS DISTINCT FROM 'string'
            OR (p_new::jsonb ->> 'subject_digest') !~ '^sha256:[0-9a-f]{64}$') THEN
        RAISE EXCEPTION 'pointer change %: an execution''s head is exactly {generation, subject_digest}: an integer from 0 and a digest',
            p_key USING ERRCODE = '22023';
    END IF;
    IF p_new IS NOT NULL AND p_pointer = 'lease' AND (
            jsonb_typeof(p_new::jsonb) IS DISTINCT FROM 'object'
            OR (p_new::jsonb - '{expires_at,holder}'::text[]) <> '{}'::jsonb
            OR jsonb_typeof(p_new::jsonb -> 'holder') IS DISTINCT FROM 'string'
            OR length(p_new::jsonb ->> 'holder') NOT BETWEEN 1 AND 256
            OR jsonb_typeof(p_new::jsonb -> 'expires_at') IS DISTINCT FROM 'string'
            OR NOT verdict._rfc3339(p_new::jsonb ->> 'expires_at')) THEN
        RAISE EXCEPTION 'pointer change %: a lease is exactly {expires_at, holder}: an RFC 3339 UTC time and a name of 1 to 256 characters',
            p_key USING ERRCODE = '22023';
    END IF;
$c$ || v_marker);

    -- A lease is taken over only once it has lapsed (an operator's aside).
    v_def := pg_get_functiondef('verdict.cas_lease(text, text, text, bigint, text, text, text, text, text)'::regprocedure);
    v_marker := $m$    RETURN QUERY SELECT * FROM verdict._cas('lease',$m$;
    IF (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker) <> 1 THEN
        RAISE EXCEPTION 'cas_lease: the call of _cas does not occur once';
    END IF;
    EXECUTE replace(v_def, v_marker, $c$    IF p_role IS DISTINCT FROM 'operator' AND p_new IS NOT NULL AND p_expected IS NOT NULL
        AND NOT coalesce((p_expected::jsonb ->> 'expires_at')::timestamptz <= verdict._store_now(),
            false) THEN
        RAISE EXCEPTION 'lease %: held until %; a lease is taken only once the one held has lapsed',
            p_name, p_expected::jsonb ->> 'expires_at' USING ERRCODE = '42501';
    END IF;
$c$ || v_marker);

    -- A change of token: a time the reader takes.
    v_def := pg_get_functiondef('verdict.put_one_credential_changes(text, text, text, text, text, text)'::regprocedure);
    v_marker := $m$        OR jsonb_typeof(v_doc -> 'changed_at') IS DISTINCT FROM 'string'$m$;
    IF (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker) <> 1 THEN
        RAISE EXCEPTION 'put_one_credential_changes: the time check does not occur once';
    END IF;
    EXECUTE replace(v_def, v_marker, v_marker || $c$
        OR NOT verdict._rfc3339(v_doc ->> 'changed_at')$c$);
END
$migrate$;

-- Bytes are read through a subject that names them (objective, resource, check definition) and
-- vouches for them: stored after them (the subjects' trigger checked its producer then), or
-- put by a producer who put them. The position test only spares the parse of subjects that
-- cannot name them.
CREATE OR REPLACE FUNCTION verdict._reads_blob(p_key text) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM verdict.grants g, LATERAL (
                SELECT e.key, e.seq, e.body FROM verdict.subjects e
                WHERE g.scope_kind = 'execution' AND e.execution_id = g.scope_id
                UNION ALL
                SELECT m.key, m.seq, m.body FROM verdict.subjects m
                WHERE g.scope_kind = 'mission' AND (m.body::jsonb ->> 'mission') = g.scope_id) s
            WHERE g.principal = verdict._reader()
              AND position(p_key IN s.body) > 0
              AND p_key IN (SELECT verdict._named_digests(s.body::jsonb))
              AND (s.seq > (SELECT b.seq FROM verdict.blobs b WHERE b.key = p_key)
                  OR verdict._blob_put_by(s.body::jsonb #>> '{producer,principal}', p_key))
              AND verdict._reads_subject(s.key));
END $$;

ALTER POLICY blobs_read_granted ON verdict.blobs USING (verdict._reader_wrote(seq)
    OR verdict._reads_blob(key)
    OR EXISTS (SELECT 1 FROM verdict.blob_holders h
        WHERE h.blob = blobs.key AND h.holder = verdict._reader()));

-- A job's text, bounded whoever writes it (see the header).
CREATE FUNCTION verdict._job_text_bounded() RETURNS trigger
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
BEGIN
    -- Only what this write changes: a row stored before this version, or cut already, is left
    -- as it is.
    IF length(NEW.holder) > 256 AND (TG_OP = 'INSERT' OR NEW.holder IS DISTINCT FROM OLD.holder) THEN
        RAISE EXCEPTION 'job %: a holder is at most 256 characters, not %', NEW.id,
            length(NEW.holder) USING ERRCODE = '22023';
    END IF;
    IF length(NEW.outcome) > 4000 AND (TG_OP = 'INSERT' OR NEW.outcome IS DISTINCT FROM OLD.outcome) THEN
        NEW.outcome := left(NEW.outcome, 4000) || ' [cut: ' || length(NEW.outcome) || ' characters]';
    END IF;
    IF length(NEW.last_error) > 4000
        AND (TG_OP = 'INSERT' OR NEW.last_error IS DISTINCT FROM OLD.last_error) THEN
        NEW.last_error := left(NEW.last_error, 4000) || ' [cut: ' || length(NEW.last_error)
            || ' characters]';
    END IF;
    RETURN NEW;
END $$;
REVOKE ALL ON FUNCTION verdict._job_text_bounded() FROM PUBLIC;
CREATE TRIGGER jobs_text_bounded BEFORE INSERT OR UPDATE ON verdict.jobs
    FOR EACH ROW EXECUTE FUNCTION verdict._job_text_bounded();
