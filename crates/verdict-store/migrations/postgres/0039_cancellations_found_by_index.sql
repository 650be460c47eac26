-- verdict store, PostgreSQL schema version 39: an execution's cancellation is found through an
-- index, not by reading every request.
--
-- Admitting a run (the verifier_runs trigger of schema 14) and a producer ending a run (the
-- run_events check of schema 11) ask whether the execution was cancelled: whether
-- verification_requests holds a cancellation note naming it. The note is told apart only by
-- its body, so with no index on what the question names the planner read the whole table and
-- parsed every stored body as JSON, for every run admitted. That read grew with every request
-- the store ever kept (about 50 ms at 3,400 requests), and it ran under the audit chain's lock,
-- so every other writer waited for it too.
--
-- A partial index on the cancelled execution's id, over cancellation notes of executions only,
-- answers the question by one index lookup. Its expressions are the ones both checks write,
-- so the planner matches them; nothing the checks decide changes.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

CREATE INDEX verification_requests_cancelled_execution
    ON verdict.verification_requests ((body::jsonb #>> '{cancelled,id}'))
    WHERE (body::jsonb ->> 'schema') = 'verdict.cancellation/v1'
      AND (body::jsonb #>> '{cancelled,kind}') = 'execution';

RESET ROLE;
