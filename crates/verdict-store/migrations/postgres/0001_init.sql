-- verdict store, PostgreSQL schema version 1.
--
-- Authority lives in the database. Everything below is owned by a NOLOGIN owner role; the
-- principal roles (operator, producer, runner, verifier, human, gate) may read every table but
-- write only by calling the SECURITY DEFINER routines granted to them, each with a fixed
-- search_path. UPDATE, DELETE and TRUNCATE are revoked, refused by triggers on every evidence
-- table and on the audit log, and row security is forced, so even the owner inserts only
-- through the policies below. The routines append the audit event in the same transaction and
-- compute its hash here, in the database.
--
-- The role names are placeholders (__OWNER__ and so on), replaced by quoted identifiers built
-- from the configured role prefix when the migration runs.

CREATE SCHEMA verdict AUTHORIZATION __OWNER__;
SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

CREATE TABLE verdict.schema_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE verdict.store_meta (
    key text PRIMARY KEY,
    value text NOT NULL
);
INSERT INTO verdict.store_meta (key, value) VALUES ('role_prefix', __PREFIX_LITERAL__);

CREATE TABLE verdict.audit_events (
    seq bigint PRIMARY KEY,
    prev_hash text NOT NULL,
    hash text NOT NULL,
    event_type text NOT NULL,
    tbl text NOT NULL,
    key text NOT NULL,
    principal text NOT NULL,
    role text NOT NULL,
    payload_digest text NOT NULL,
    correlation text,
    recorded_at text NOT NULL
);

CREATE TABLE verdict.principals (
    seq bigint NOT NULL UNIQUE,
    key text PRIMARY KEY,
    digest text NOT NULL,
    body text NOT NULL,
    name text GENERATED ALWAYS AS (((body::jsonb) ->>'name')) STORED,
    role text GENERATED ALWAYS AS (((body::jsonb) ->>'role')) STORED,
    token_sha256 text GENERATED ALWAYS AS (((body::jsonb) ->>'token_sha256')) STORED
);
CREATE UNIQUE INDEX principals_token_sha256 ON verdict.principals (token_sha256);

CREATE TABLE verdict.grants (
    seq bigint NOT NULL UNIQUE,
    key text PRIMARY KEY,
    digest text NOT NULL,
    body text NOT NULL,
    principal text GENERATED ALWAYS AS (((body::jsonb) ->>'principal')) STORED,
    scope_kind text GENERATED ALWAYS AS (((body::jsonb) #>>'{scope,kind}')) STORED,
    scope_id text GENERATED ALWAYS AS (((body::jsonb) #>>'{scope,id}')) STORED
);
CREATE INDEX grants_principal ON verdict.grants (principal);

CREATE TABLE verdict.grant_revocations (
    seq bigint NOT NULL UNIQUE,
    key text PRIMARY KEY,
    digest text NOT NULL,
    body text NOT NULL,
    grant_id text GENERATED ALWAYS AS (((body::jsonb) ->>'grant_id')) STORED
);

CREATE TABLE verdict.subjects (
    seq bigint NOT NULL UNIQUE,
    key text PRIMARY KEY,
    digest text NOT NULL,
    body text NOT NULL,
    execution_id text GENERATED ALWAYS AS (((body::jsonb) #>>'{execution,id}')) STORED,
    generation bigint GENERATED ALWAYS AS ((((body::jsonb) #>>'{execution,generation}')::bigint)) STORED
);
CREATE INDEX subjects_execution_id ON verdict.subjects (execution_id);

CREATE TABLE verdict.policies (
    seq bigint NOT NULL UNIQUE,
    key text PRIMARY KEY,
    digest text NOT NULL,
    body text NOT NULL,
    name text GENERATED ALWAYS AS (((body::jsonb) ->>'name')) STORED,
    revision bigint GENERATED ALWAYS AS ((((body::jsonb) ->>'revision')::bigint)) STORED
);
CREATE INDEX policies_name ON verdict.policies (name);

CREATE TABLE verdict.check_evidence (
    seq bigint NOT NULL UNIQUE,
    key text PRIMARY KEY,
    digest text NOT NULL,
    body text NOT NULL,
    subject_digest text GENERATED ALWAYS AS (((body::jsonb) ->>'subject_digest')) STORED,
    evidence_id text GENERATED ALWAYS AS (((body::jsonb) ->>'id')) STORED,
    check_id text GENERATED ALWAYS AS (((body::jsonb) ->>'check')) STORED
);
CREATE INDEX check_evidence_subject_digest ON verdict.check_evidence (subject_digest);

CREATE TABLE verdict.verification_requests (
    seq bigint NOT NULL UNIQUE,
    key text PRIMARY KEY,
    digest text NOT NULL,
    body text NOT NULL,
    subject_digest text GENERATED ALWAYS AS (((body::jsonb) ->>'subject_digest')) STORED
);
CREATE INDEX verification_requests_subject_digest ON verdict.verification_requests (subject_digest);

CREATE TABLE verdict.verifier_runs (
    seq bigint NOT NULL UNIQUE,
    key text PRIMARY KEY,
    digest text NOT NULL,
    body text NOT NULL,
    run_id text GENERATED ALWAYS AS (((body::jsonb) ->>'run_id')) STORED,
    request_digest text GENERATED ALWAYS AS (((body::jsonb) ->>'request_digest')) STORED,
    subject_digest text GENERATED ALWAYS AS (((body::jsonb) ->>'subject_digest')) STORED,
    verifier text GENERATED ALWAYS AS (((body::jsonb) ->>'verifier')) STORED,
    class text GENERATED ALWAYS AS (((body::jsonb) ->>'class')) STORED,
    generation bigint GENERATED ALWAYS AS ((((body::jsonb) ->>'admitted_generation')::bigint)) STORED
);
CREATE INDEX verifier_runs_subject_digest ON verdict.verifier_runs (subject_digest);

CREATE TABLE verdict.run_events (
    seq bigint NOT NULL UNIQUE,
    key text PRIMARY KEY,
    digest text NOT NULL,
    body text NOT NULL,
    run_id text GENERATED ALWAYS AS (((body::jsonb) ->>'run_id')) STORED,
    n bigint GENERATED ALWAYS AS ((((body::jsonb) ->>'n')::bigint)) STORED,
    status text GENERATED ALWAYS AS (((body::jsonb) ->>'status')) STORED
);
CREATE INDEX run_events_run_id ON verdict.run_events (run_id);

CREATE TABLE verdict.verification_results (
    seq bigint NOT NULL UNIQUE,
    key text PRIMARY KEY,
    digest text NOT NULL,
    body text NOT NULL,
    counted boolean NOT NULL,
    subject_digest text GENERATED ALWAYS AS (((body::jsonb) ->>'subject_digest')) STORED,
    run_id text GENERATED ALWAYS AS (((body::jsonb) #>>'{verifier,run}')) STORED,
    verifier text GENERATED ALWAYS AS (((body::jsonb) #>>'{verifier,principal}')) STORED,
    class text GENERATED ALWAYS AS (((body::jsonb) #>>'{verifier,class}')) STORED,
    generation bigint GENERATED ALWAYS AS ((((body::jsonb) ->>'generation')::bigint)) STORED,
    status text GENERATED ALWAYS AS (((body::jsonb) ->>'status')) STORED
);
CREATE INDEX verification_results_subject_digest ON verdict.verification_results (subject_digest);
CREATE INDEX verification_results_run_id ON verdict.verification_results (run_id);

CREATE TABLE verdict.findings (
    seq bigint NOT NULL UNIQUE,
    key text PRIMARY KEY,
    digest text NOT NULL,
    body text NOT NULL,
    finding_id text GENERATED ALWAYS AS (((body::jsonb) ->>'id')) STORED,
    version bigint GENERATED ALWAYS AS ((((body::jsonb) ->>'version')::bigint)) STORED,
    subject_digest text GENERATED ALWAYS AS (((body::jsonb) ->>'subject_digest')) STORED
);
CREATE INDEX findings_subject_digest ON verdict.findings (subject_digest);
CREATE UNIQUE INDEX findings_digest ON verdict.findings (digest);

CREATE TABLE verdict.human_decisions (
    seq bigint NOT NULL UNIQUE,
    key text PRIMARY KEY,
    digest text NOT NULL,
    body text NOT NULL,
    subject_digest text GENERATED ALWAYS AS (((body::jsonb) ->>'subject_digest')) STORED,
    policy_digest text GENERATED ALWAYS AS (((body::jsonb) ->>'policy_digest')) STORED,
    principal text GENERATED ALWAYS AS (((body::jsonb) ->>'principal')) STORED
);
CREATE INDEX human_decisions_subject_digest ON verdict.human_decisions (subject_digest);

CREATE TABLE verdict.gate_decisions (
    seq bigint NOT NULL UNIQUE,
    key text PRIMARY KEY,
    digest text NOT NULL,
    body text NOT NULL,
    evaluation_key text GENERATED ALWAYS AS (((body::jsonb) ->>'evaluation_key')) STORED,
    subject_digest text GENERATED ALWAYS AS (((body::jsonb) ->>'subject_digest')) STORED,
    policy_digest text GENERATED ALWAYS AS (((body::jsonb) ->>'policy_digest')) STORED,
    outcome text GENERATED ALWAYS AS (((body::jsonb) ->>'outcome')) STORED
);
CREATE INDEX gate_decisions_subject_digest ON verdict.gate_decisions (subject_digest);
CREATE UNIQUE INDEX gate_decisions_digest ON verdict.gate_decisions (digest);

CREATE TABLE verdict.pointer_changes (
    seq bigint NOT NULL UNIQUE,
    key text PRIMARY KEY,
    digest text NOT NULL,
    body text NOT NULL,
    pointer text GENERATED ALWAYS AS (((body::jsonb) ->>'pointer')) STORED,
    name text GENERATED ALWAYS AS (((body::jsonb) ->>'name')) STORED,
    revision bigint GENERATED ALWAYS AS ((((body::jsonb) ->>'revision')::bigint)) STORED
);
CREATE INDEX pointer_changes_pointer ON verdict.pointer_changes (pointer, name, revision);

CREATE TABLE verdict.pointers (
    pointer text NOT NULL,
    name text NOT NULL,
    revision bigint NOT NULL,
    value text,
    PRIMARY KEY (pointer, name)
);

-- Append-only: any UPDATE, DELETE or TRUNCATE of an evidence table or the audit log fails here,
-- whoever asks (the owner and superusers included, short of disabling triggers).
CREATE FUNCTION verdict.refuse_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP;
END $$;

-- A pointer moves only to its next revision, and only to the value an appended
-- pointer_changes record of that revision names: every change is audited.
CREATE FUNCTION verdict.pointer_guard() RETURNS trigger
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'TRUNCATE') THEN
        RAISE EXCEPTION 'pointers are never deleted: % refused', TG_OP;
    END IF;
    IF TG_OP = 'UPDATE' AND (NEW.pointer <> OLD.pointer OR NEW.name <> OLD.name
                             OR NEW.revision <> OLD.revision + 1) THEN
        RAISE EXCEPTION 'pointer update must keep its name and advance one revision';
    END IF;
    IF TG_OP = 'INSERT' AND NEW.revision <> 1 THEN
        RAISE EXCEPTION 'a new pointer starts at revision 1';
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM verdict.pointer_changes c
        WHERE c.pointer = NEW.pointer AND c.name = NEW.name AND c.revision = NEW.revision
          AND (c.body::jsonb -> 'new') = coalesce(NEW.value, 'null')::jsonb
    ) THEN
        RAISE EXCEPTION 'pointer % % revision % has no matching pointer_changes record',
            NEW.pointer, NEW.name, NEW.revision;
    END IF;
    RETURN NEW;
END $$;

-- Whether a verification result counts: its subject and generation are the execution's
-- current ones at the moment it is appended (a late result is kept as history).
CREATE FUNCTION verdict.result_counted() RETURNS trigger
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_doc jsonb := NEW.body::jsonb;
BEGIN
    NEW.counted := EXISTS (
        SELECT 1 FROM verdict.subjects s
        JOIN verdict.pointers p ON p.pointer = 'execution' AND p.name = s.execution_id
        WHERE s.key = v_doc ->> 'subject_digest'
          AND (p.value::jsonb ->> 'subject_digest') = s.key
          AND (p.value::jsonb ->> 'generation')::bigint = (v_doc ->> 'generation')::bigint);
    RETURN NEW;
END $$;
CREATE TRIGGER verification_results_counted BEFORE INSERT ON verdict.verification_results
    FOR EACH ROW EXECUTE FUNCTION verdict.result_counted();

CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON verdict.audit_events
    FOR EACH ROW EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON verdict.audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER schema_migrations_append_only BEFORE UPDATE OR DELETE ON verdict.schema_migrations
    FOR EACH ROW EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER schema_migrations_no_truncate BEFORE TRUNCATE ON verdict.schema_migrations
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER store_meta_append_only BEFORE UPDATE OR DELETE ON verdict.store_meta
    FOR EACH ROW EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER store_meta_no_truncate BEFORE TRUNCATE ON verdict.store_meta
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER principals_append_only BEFORE UPDATE OR DELETE ON verdict.principals
    FOR EACH ROW EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER principals_no_truncate BEFORE TRUNCATE ON verdict.principals
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER grants_append_only BEFORE UPDATE OR DELETE ON verdict.grants
    FOR EACH ROW EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER grants_no_truncate BEFORE TRUNCATE ON verdict.grants
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER grant_revocations_append_only BEFORE UPDATE OR DELETE ON verdict.grant_revocations
    FOR EACH ROW EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER grant_revocations_no_truncate BEFORE TRUNCATE ON verdict.grant_revocations
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER subjects_append_only BEFORE UPDATE OR DELETE ON verdict.subjects
    FOR EACH ROW EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER subjects_no_truncate BEFORE TRUNCATE ON verdict.subjects
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER policies_append_only BEFORE UPDATE OR DELETE ON verdict.policies
    FOR EACH ROW EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER policies_no_truncate BEFORE TRUNCATE ON verdict.policies
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER check_evidence_append_only BEFORE UPDATE OR DELETE ON verdict.check_evidence
    FOR EACH ROW EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER check_evidence_no_truncate BEFORE TRUNCATE ON verdict.check_evidence
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER verification_requests_append_only BEFORE UPDATE OR DELETE ON verdict.verification_requests
    FOR EACH ROW EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER verification_requests_no_truncate BEFORE TRUNCATE ON verdict.verification_requests
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER verifier_runs_append_only BEFORE UPDATE OR DELETE ON verdict.verifier_runs
    FOR EACH ROW EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER verifier_runs_no_truncate BEFORE TRUNCATE ON verdict.verifier_runs
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER run_events_append_only BEFORE UPDATE OR DELETE ON verdict.run_events
    FOR EACH ROW EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER run_events_no_truncate BEFORE TRUNCATE ON verdict.run_events
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER verification_results_append_only BEFORE UPDATE OR DELETE ON verdict.verification_results
    FOR EACH ROW EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER verification_results_no_truncate BEFORE TRUNCATE ON verdict.verification_results
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER findings_append_only BEFORE UPDATE OR DELETE ON verdict.findings
    FOR EACH ROW EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER findings_no_truncate BEFORE TRUNCATE ON verdict.findings
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER human_decisions_append_only BEFORE UPDATE OR DELETE ON verdict.human_decisions
    FOR EACH ROW EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER human_decisions_no_truncate BEFORE TRUNCATE ON verdict.human_decisions
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER gate_decisions_append_only BEFORE UPDATE OR DELETE ON verdict.gate_decisions
    FOR EACH ROW EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER gate_decisions_no_truncate BEFORE TRUNCATE ON verdict.gate_decisions
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER pointer_changes_append_only BEFORE UPDATE OR DELETE ON verdict.pointer_changes
    FOR EACH ROW EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER pointer_changes_no_truncate BEFORE TRUNCATE ON verdict.pointer_changes
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER pointers_guard BEFORE INSERT OR UPDATE OR DELETE ON verdict.pointers
    FOR EACH ROW EXECUTE FUNCTION verdict.pointer_guard();
CREATE TRIGGER pointers_no_truncate BEFORE TRUNCATE ON verdict.pointers
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.pointer_guard();

-- digest(domain, body) = "sha256:" + hex(SHA-256("verdict:" + domain + ":v1" + 0x00 + body)),
-- the same construction as document digests.
CREATE FUNCTION verdict.row_digest(p_domain text, p_body text) RETURNS text
LANGUAGE sql STABLE SET search_path = verdict, pg_temp AS $$
    SELECT 'sha256:' || encode(sha256(convert_to('verdict:' || p_domain || ':v1', 'UTF8')
        || '\x00'::bytea || convert_to(p_body, 'UTF8')), 'hex')
$$;

-- Appends one audit event after the current head and returns its seq. The transaction-scoped
-- advisory lock serialises every writer of the chain until commit.
CREATE FUNCTION verdict._audit(p_event text, p_table text, p_key text, p_payload text,
    p_principal text, p_role text, p_correlation text) RETURNS bigint
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_last bigint;
    v_prev text;
    v_seq bigint;
    v_at text;
    v_pre text;
BEGIN
    PERFORM pg_advisory_xact_lock(8531478330712965377);
    SELECT seq, hash INTO v_last, v_prev FROM verdict.audit_events ORDER BY seq DESC LIMIT 1;
    v_seq := coalesce(v_last, 0) + 1;
    v_prev := coalesce(v_prev, 'sha256:' || repeat('0', 64));
    v_at := to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"');
    -- RFC 8785 form of the event without its hash: keys in order, strings escaped by to_json,
    -- which escapes exactly as JCS does.
    v_pre := '{"correlation":' || coalesce(to_json(p_correlation)::text, 'null')
        || ',"event_type":' || to_json(p_event)::text
        || ',"key":' || to_json(p_key)::text
        || ',"payload_digest":' || to_json(p_payload)::text
        || ',"prev_hash":' || to_json(v_prev)::text
        || ',"principal":' || to_json(p_principal)::text
        || ',"recorded_at":' || to_json(v_at)::text
        || ',"role":' || to_json(p_role)::text
        || ',"seq":' || v_seq::text
        || ',"table":' || to_json(p_table)::text || '}';
    INSERT INTO verdict.audit_events (seq, prev_hash, hash, event_type, tbl, key, principal, role,
        payload_digest, correlation, recorded_at)
    VALUES (v_seq, v_prev, verdict.row_digest('audit-event', v_pre), p_event, p_table, p_key,
        p_principal, p_role, p_payload, p_correlation, v_at);
    RETURN v_seq;
END $$;

-- The role a write claims for its audit event must be the role the connection acts in: the
-- role set with SET ROLE or, without one, a role the session user is a member of.
CREATE FUNCTION verdict._claim(p_role text) RETURNS void
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_claimed text := __PREFIX_LITERAL__ || p_role;
    v_set text := current_setting('role');
BEGIN
    IF v_set <> 'none' AND v_set <> v_claimed THEN
        RAISE EXCEPTION 'acting as role %, not as %', v_set, v_claimed USING ERRCODE = '42501';
    END IF;
    IF v_set = 'none' AND NOT pg_has_role(session_user, v_claimed, 'MEMBER') THEN
        RAISE EXCEPTION '% is not a member of %', session_user, v_claimed USING ERRCODE = '42501';
    END IF;
END $$;

-- Compare-and-set of one pointer on its expected revision and value, appending the change
-- record (and its audit event) in the same transaction.
CREATE FUNCTION verdict._cas(p_pointer text, p_allowed text[], p_principal text, p_role text,
    p_name text, p_expected_revision bigint, p_expected text, p_new text, p_key text,
    p_digest text, p_body text)
RETURNS TABLE (r_ok boolean, r_revision bigint, r_value text, r_seq bigint)
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_doc jsonb := p_body::jsonb;
    v_rev bigint;
    v_val text;
    v_seq bigint;
BEGIN
    IF NOT (p_role = ANY (p_allowed)) THEN
        RAISE EXCEPTION 'role % may not move % pointers', p_role, p_pointer USING ERRCODE = '42501';
    END IF;
    PERFORM verdict._claim(p_role);
    IF p_digest IS DISTINCT FROM verdict.row_digest('store.pointer-change', p_body) THEN
        RAISE EXCEPTION 'pointer change %: digest does not match the body', p_key USING ERRCODE = '22023';
    END IF;
    IF v_doc ->> 'pointer' IS DISTINCT FROM p_pointer OR v_doc ->> 'name' IS DISTINCT FROM p_name
        OR (v_doc ->> 'revision')::bigint IS DISTINCT FROM p_expected_revision + 1
        OR (v_doc -> 'old') IS DISTINCT FROM coalesce(p_expected, 'null')::jsonb
        OR (v_doc -> 'new') IS DISTINCT FROM coalesce(p_new, 'null')::jsonb THEN
        RAISE EXCEPTION 'pointer change % does not describe this change', p_key USING ERRCODE = '22023';
    END IF;
    PERFORM pg_advisory_xact_lock(8531478330712965377);
    SELECT revision, value INTO v_rev, v_val FROM verdict.pointers
        WHERE pointer = p_pointer AND name = p_name FOR UPDATE;
    IF coalesce(v_rev, 0) <> p_expected_revision OR v_val IS DISTINCT FROM p_expected THEN
        RETURN QUERY SELECT false, coalesce(v_rev, 0), v_val, NULL::bigint;
        RETURN;
    END IF;
    v_seq := verdict._audit('cas', 'pointer_changes', p_key, p_digest, p_principal, p_role, p_name);
    INSERT INTO verdict.pointer_changes (seq, key, digest, body) VALUES (v_seq, p_key, p_digest, p_body);
    IF v_rev IS NULL THEN
        INSERT INTO verdict.pointers (pointer, name, revision, value) VALUES (p_pointer, p_name, 1, p_new);
    ELSE
        UPDATE verdict.pointers SET revision = v_rev + 1, value = p_new
            WHERE pointer = p_pointer AND name = p_name;
    END IF;
    RETURN QUERY SELECT true, p_expected_revision + 1, p_new, v_seq;
END $$;

-- The routines each principal role may call, one per table, each the only way to write its
-- table. A call appends a run of records in order (one round trip for a batch): for each, the
-- digest is checked against the body, a stored key returns the stored row, and a new record is
-- inserted with its audit event, all under the chain lock. They are made from one template,
-- so every table gets the same code with static (planned once) SQL.
DO $make$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT * FROM (VALUES
        ('principals', 'store.principal', ARRAY['operator']),
        ('grants', 'store.grant', ARRAY['operator']),
        ('grant_revocations', 'store.grant-revocation', ARRAY['operator']),
        ('subjects', 'subject', ARRAY['producer', 'operator']),
        ('policies', 'policy', ARRAY['operator']),
        ('check_evidence', 'evidence', ARRAY['runner', 'producer']),
        ('verification_requests', 'request', ARRAY['operator', 'producer']),
        ('verifier_runs', 'store.verifier-run', ARRAY['operator']),
        ('run_events', 'store.run-event', ARRAY['operator', 'verifier']),
        ('verification_results', 'verification', ARRAY['verifier']),
        ('findings', 'finding', ARRAY['verifier']),
        ('human_decisions', 'human-decision', ARRAY['human']),
        ('gate_decisions', 'decision', ARRAY['gate'])
    ) AS v(name, domain, allowed) LOOP
        EXECUTE format($template$
CREATE FUNCTION verdict.put_%1$s(p_principal text, p_role text, p_keys text[], p_digests text[],
    p_bodies text[], p_correlations text[])
RETURNS TABLE (r_seq bigint, r_digest text, r_body text, r_inserted boolean, r_counted boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = verdict, pg_temp AS $body$
DECLARE
    v_last bigint;
    v_prev text;
    v_at text;
    v_pre text;
    v_hash text;
BEGIN
    IF NOT (p_role = ANY (%3$L::text[])) THEN
        RAISE EXCEPTION 'role %% may not write %1$s', p_role USING ERRCODE = '42501';
    END IF;
    PERFORM verdict._claim(p_role);
    IF coalesce(array_length(p_keys, 1), 0) <> coalesce(array_length(p_digests, 1), 0)
        OR coalesce(array_length(p_keys, 1), 0) <> coalesce(array_length(p_bodies, 1), 0)
        OR coalesce(array_length(p_keys, 1), 0) <> coalesce(array_length(p_correlations, 1), 0) THEN
        RAISE EXCEPTION 'put_%1$s: arrays of different lengths' USING ERRCODE = '22023';
    END IF;
    -- Look and append under the chain lock, so a concurrent writer of the same key has either
    -- committed (and is found) or not started.
    PERFORM pg_advisory_xact_lock(8531478330712965377);
    SELECT seq, hash INTO v_last, v_prev FROM verdict.audit_events ORDER BY seq DESC LIMIT 1;
    v_last := coalesce(v_last, 0);
    v_prev := coalesce(v_prev, 'sha256:' || repeat('0', 64));
    v_at := to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"');
    FOR i IN 1 .. coalesce(array_length(p_keys, 1), 0) LOOP
        IF p_digests[i] IS DISTINCT FROM 'sha256:' || encode(sha256(convert_to('verdict:' || %2$L || ':v1', 'UTF8')
            || '\x00'::bytea || convert_to(p_bodies[i], 'UTF8')), 'hex') THEN
            RAISE EXCEPTION '%1$s %%: digest %% does not match the body', p_keys[i], p_digests[i]
                USING ERRCODE = '22023';
        END IF;
        SELECT seq, digest, body, %4$s INTO r_seq, r_digest, r_body, r_counted
            FROM verdict.%1$I WHERE key = p_keys[i];
        IF FOUND THEN
            r_inserted := false;
            RETURN NEXT;
            CONTINUE;
        END IF;
        v_last := v_last + 1;
        -- RFC 8785 form of the event without its hash: keys in order, strings escaped by
        -- to_json, which escapes exactly as JCS does.
        v_pre := '{"correlation":' || coalesce(to_json(p_correlations[i])::text, 'null')
            || ',"event_type":"append","key":' || to_json(p_keys[i])::text
            || ',"payload_digest":' || to_json(p_digests[i])::text
            || ',"prev_hash":' || to_json(v_prev)::text
            || ',"principal":' || to_json(p_principal)::text
            || ',"recorded_at":' || to_json(v_at)::text
            || ',"role":' || to_json(p_role)::text
            || ',"seq":' || v_last::text
            || ',"table":"%1$s"}';
        v_hash := 'sha256:' || encode(sha256(convert_to('verdict:audit-event:v1', 'UTF8') || '\x00'::bytea
            || convert_to(v_pre, 'UTF8')), 'hex');
        INSERT INTO verdict.audit_events (seq, prev_hash, hash, event_type, tbl, key, principal, role,
            payload_digest, correlation, recorded_at)
        VALUES (v_last, v_prev, v_hash, 'append', %1$L, p_keys[i], p_principal, p_role, p_digests[i],
            p_correlations[i], v_at);
        INSERT INTO verdict.%1$I (seq, key, digest, body)
            VALUES (v_last, p_keys[i], p_digests[i], p_bodies[i]) %5$s;
        v_prev := v_hash;
        r_seq := v_last;
        r_digest := p_digests[i];
        r_body := p_bodies[i];
        r_inserted := true;
        RETURN NEXT;
    END LOOP;
END $body$;
$template$,
            t.name, t.domain, t.allowed,
            CASE WHEN t.name = 'verification_results' THEN 'counted' ELSE 'NULL::boolean' END,
            CASE WHEN t.name = 'verification_results' THEN 'RETURNING counted INTO r_counted'
                 ELSE '' END);
    END LOOP;
END $make$;

CREATE FUNCTION verdict.cas_execution(p_principal text, p_role text, p_name text,
    p_expected_revision bigint, p_expected text, p_new text, p_key text, p_digest text, p_body text)
RETURNS TABLE (r_ok boolean, r_revision bigint, r_value text, r_seq bigint)
LANGUAGE sql SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
    SELECT * FROM verdict._cas('execution', ARRAY['operator'], p_principal, p_role, p_name, p_expected_revision,
        p_expected, p_new, p_key, p_digest, p_body)
$$;
CREATE FUNCTION verdict.cas_gate(p_principal text, p_role text, p_name text,
    p_expected_revision bigint, p_expected text, p_new text, p_key text, p_digest text, p_body text)
RETURNS TABLE (r_ok boolean, r_revision bigint, r_value text, r_seq bigint)
LANGUAGE sql SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
    SELECT * FROM verdict._cas('gate', ARRAY['operator'], p_principal, p_role, p_name, p_expected_revision,
        p_expected, p_new, p_key, p_digest, p_body)
$$;
CREATE FUNCTION verdict.cas_lease(p_principal text, p_role text, p_name text,
    p_expected_revision bigint, p_expected text, p_new text, p_key text, p_digest text, p_body text)
RETURNS TABLE (r_ok boolean, r_revision bigint, r_value text, r_seq bigint)
LANGUAGE sql SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
    SELECT * FROM verdict._cas('lease', ARRAY['operator', 'runner', 'verifier'], p_principal, p_role, p_name, p_expected_revision,
        p_expected, p_new, p_key, p_digest, p_body)
$$;

-- Privileges: read for every principal role, write only through the routines above.
REVOKE ALL ON SCHEMA verdict FROM PUBLIC;
GRANT USAGE ON SCHEMA verdict TO __OPERATOR__, __PRODUCER__, __RUNNER__, __VERIFIER__, __HUMAN__, __GATE__;
REVOKE ALL ON ALL TABLES IN SCHEMA verdict FROM PUBLIC;
GRANT SELECT ON ALL TABLES IN SCHEMA verdict TO __OPERATOR__, __PRODUCER__, __RUNNER__, __VERIFIER__, __HUMAN__, __GATE__;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA verdict FROM PUBLIC;
REVOKE UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA verdict FROM __OWNER__;
GRANT UPDATE ON verdict.pointers TO __OWNER__;

GRANT EXECUTE ON FUNCTION verdict.put_principals(text, text, text[], text[], text[], text[]) TO __OPERATOR__;
GRANT EXECUTE ON FUNCTION verdict.put_grants(text, text, text[], text[], text[], text[]) TO __OPERATOR__;
GRANT EXECUTE ON FUNCTION verdict.put_grant_revocations(text, text, text[], text[], text[], text[]) TO __OPERATOR__;
GRANT EXECUTE ON FUNCTION verdict.put_subjects(text, text, text[], text[], text[], text[]) TO __PRODUCER__, __OPERATOR__;
GRANT EXECUTE ON FUNCTION verdict.put_policies(text, text, text[], text[], text[], text[]) TO __OPERATOR__;
GRANT EXECUTE ON FUNCTION verdict.put_check_evidence(text, text, text[], text[], text[], text[]) TO __RUNNER__, __PRODUCER__;
GRANT EXECUTE ON FUNCTION verdict.put_verification_requests(text, text, text[], text[], text[], text[]) TO __OPERATOR__, __PRODUCER__;
GRANT EXECUTE ON FUNCTION verdict.put_verifier_runs(text, text, text[], text[], text[], text[]) TO __OPERATOR__;
GRANT EXECUTE ON FUNCTION verdict.put_run_events(text, text, text[], text[], text[], text[]) TO __OPERATOR__, __VERIFIER__;
GRANT EXECUTE ON FUNCTION verdict.put_verification_results(text, text, text[], text[], text[], text[]) TO __VERIFIER__;
GRANT EXECUTE ON FUNCTION verdict.put_findings(text, text, text[], text[], text[], text[]) TO __VERIFIER__;
GRANT EXECUTE ON FUNCTION verdict.put_human_decisions(text, text, text[], text[], text[], text[]) TO __HUMAN__;
GRANT EXECUTE ON FUNCTION verdict.put_gate_decisions(text, text, text[], text[], text[], text[]) TO __GATE__;
GRANT EXECUTE ON FUNCTION verdict.cas_execution(text, text, text, bigint, text, text, text, text, text) TO __OPERATOR__;
GRANT EXECUTE ON FUNCTION verdict.cas_gate(text, text, text, bigint, text, text, text, text, text) TO __OPERATOR__;
GRANT EXECUTE ON FUNCTION verdict.cas_lease(text, text, text, bigint, text, text, text, text, text) TO __OPERATOR__, __RUNNER__, __VERIFIER__;

-- Row security, forced: the owner too inserts only through these policies.
ALTER TABLE verdict.audit_events ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.audit_events FORCE ROW LEVEL SECURITY;
CREATE POLICY audit_events_read ON verdict.audit_events FOR SELECT USING (true);
CREATE POLICY audit_events_append ON verdict.audit_events FOR INSERT TO __OWNER__ WITH CHECK (true);
ALTER TABLE verdict.schema_migrations ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.schema_migrations FORCE ROW LEVEL SECURITY;
CREATE POLICY schema_migrations_read ON verdict.schema_migrations FOR SELECT USING (true);
CREATE POLICY schema_migrations_append ON verdict.schema_migrations FOR INSERT TO __OWNER__ WITH CHECK (true);
ALTER TABLE verdict.store_meta ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.store_meta FORCE ROW LEVEL SECURITY;
CREATE POLICY store_meta_read ON verdict.store_meta FOR SELECT USING (true);
CREATE POLICY store_meta_append ON verdict.store_meta FOR INSERT TO __OWNER__ WITH CHECK (true);
ALTER TABLE verdict.pointers ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.pointers FORCE ROW LEVEL SECURITY;
CREATE POLICY pointers_read ON verdict.pointers FOR SELECT USING (true);
CREATE POLICY pointers_append ON verdict.pointers FOR INSERT TO __OWNER__ WITH CHECK (true);
ALTER TABLE verdict.principals ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.principals FORCE ROW LEVEL SECURITY;
CREATE POLICY principals_read ON verdict.principals FOR SELECT USING (true);
CREATE POLICY principals_append ON verdict.principals FOR INSERT TO __OWNER__ WITH CHECK (true);
ALTER TABLE verdict.grants ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.grants FORCE ROW LEVEL SECURITY;
CREATE POLICY grants_read ON verdict.grants FOR SELECT USING (true);
CREATE POLICY grants_append ON verdict.grants FOR INSERT TO __OWNER__ WITH CHECK (true);
ALTER TABLE verdict.grant_revocations ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.grant_revocations FORCE ROW LEVEL SECURITY;
CREATE POLICY grant_revocations_read ON verdict.grant_revocations FOR SELECT USING (true);
CREATE POLICY grant_revocations_append ON verdict.grant_revocations FOR INSERT TO __OWNER__ WITH CHECK (true);
ALTER TABLE verdict.subjects ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.subjects FORCE ROW LEVEL SECURITY;
CREATE POLICY subjects_read ON verdict.subjects FOR SELECT USING (true);
CREATE POLICY subjects_append ON verdict.subjects FOR INSERT TO __OWNER__ WITH CHECK (true);
ALTER TABLE verdict.policies ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.policies FORCE ROW LEVEL SECURITY;
CREATE POLICY policies_read ON verdict.policies FOR SELECT USING (true);
CREATE POLICY policies_append ON verdict.policies FOR INSERT TO __OWNER__ WITH CHECK (true);
ALTER TABLE verdict.check_evidence ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.check_evidence FORCE ROW LEVEL SECURITY;
CREATE POLICY check_evidence_read ON verdict.check_evidence FOR SELECT USING (true);
CREATE POLICY check_evidence_append ON verdict.check_evidence FOR INSERT TO __OWNER__ WITH CHECK (true);
ALTER TABLE verdict.verification_requests ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.verification_requests FORCE ROW LEVEL SECURITY;
CREATE POLICY verification_requests_read ON verdict.verification_requests FOR SELECT USING (true);
CREATE POLICY verification_requests_append ON verdict.verification_requests FOR INSERT TO __OWNER__ WITH CHECK (true);
ALTER TABLE verdict.verifier_runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.verifier_runs FORCE ROW LEVEL SECURITY;
CREATE POLICY verifier_runs_read ON verdict.verifier_runs FOR SELECT USING (true);
CREATE POLICY verifier_runs_append ON verdict.verifier_runs FOR INSERT TO __OWNER__ WITH CHECK (true);
ALTER TABLE verdict.run_events ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.run_events FORCE ROW LEVEL SECURITY;
CREATE POLICY run_events_read ON verdict.run_events FOR SELECT USING (true);
CREATE POLICY run_events_append ON verdict.run_events FOR INSERT TO __OWNER__ WITH CHECK (true);
ALTER TABLE verdict.verification_results ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.verification_results FORCE ROW LEVEL SECURITY;
CREATE POLICY verification_results_read ON verdict.verification_results FOR SELECT USING (true);
CREATE POLICY verification_results_append ON verdict.verification_results FOR INSERT TO __OWNER__ WITH CHECK (true);
ALTER TABLE verdict.findings ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.findings FORCE ROW LEVEL SECURITY;
CREATE POLICY findings_read ON verdict.findings FOR SELECT USING (true);
CREATE POLICY findings_append ON verdict.findings FOR INSERT TO __OWNER__ WITH CHECK (true);
ALTER TABLE verdict.human_decisions ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.human_decisions FORCE ROW LEVEL SECURITY;
CREATE POLICY human_decisions_read ON verdict.human_decisions FOR SELECT USING (true);
CREATE POLICY human_decisions_append ON verdict.human_decisions FOR INSERT TO __OWNER__ WITH CHECK (true);
ALTER TABLE verdict.gate_decisions ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.gate_decisions FORCE ROW LEVEL SECURITY;
CREATE POLICY gate_decisions_read ON verdict.gate_decisions FOR SELECT USING (true);
CREATE POLICY gate_decisions_append ON verdict.gate_decisions FOR INSERT TO __OWNER__ WITH CHECK (true);
ALTER TABLE verdict.pointer_changes ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.pointer_changes FORCE ROW LEVEL SECURITY;
CREATE POLICY pointer_changes_read ON verdict.pointer_changes FOR SELECT USING (true);
CREATE POLICY pointer_changes_append ON verdict.pointer_changes FOR INSERT TO __OWNER__ WITH CHECK (true);
CREATE POLICY pointers_move ON verdict.pointers FOR UPDATE TO __OWNER__ USING (true) WITH CHECK (true);

RESET ROLE;
